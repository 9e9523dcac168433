"""`tito olympics judge`, round 4 (issue 42): each attack of the fourth red team (tests/fixtures/olympics_attacks.py)
judged at its true figure, flagged, or rejected, beside honest alice (the course CNN 50% pruned per layer) and bob
(int8), who stay unflagged and keep their ranks. One class, judged once (`python3 -m tito olympics judge` in a process of its
own, so that its memory is the judge's alone), with the instructor's held-out set; a second, small one without it.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fixtures.olympics_attacks import ATTACKERS, BEACON, EVENT, HONEST, MAGIC, make_attack_class
from tinytorch.benchmarking.olympics import rank_judged
from tito.isolation import sandbox

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 12
BUDGET_S = 20  # CPU seconds a student's sandboxes may use here (honest students here: under 2)
JUDGE_MB = 800  # the judge's own process, at its largest, with fatstate's 180 MB buffer in the class


def _judge(subs: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tito", "olympics", "judge", str(subs), "--event", EVENT,
                           "--output-dir", str(out), "--jobs", "2", "--timeout", "20", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=1500, check=False)


def _load(out: Path) -> dict:
    return {"out": out, "students": {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")},
            "rejected": json.loads((out / "rejected.json").read_text()), "run": json.loads((out / "run.json").read_text()),
            "md": (out / "leaderboard.md").read_text(), "csv": (out / "leaderboard.csv").read_text()}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    if sandbox.find() is None:
        pytest.skip("the judge needs bubblewrap (apt-get install bubblewrap)")
    from tinytorch.benchmarking.digits import load_digits_split

    root = tmp_path_factory.mktemp("olympics_attacks")
    expected = make_attack_class(root / "submissions")
    X, y = load_digits_split("train")  # the instructor's held-out set (train-split images stand in for it here)
    np.savez(root / "held_out.npz", images=X[:300].numpy(), labels=y[:300].numpy())
    run = _judge(root / "submissions", root / "out", "--rounds", str(ROUNDS), "--data", str(root / "held_out.npz"),
                 "--student-seconds", str(BUDGET_S))
    assert run.returncode == 0, run.stderr[-3000:]
    # without --data (the public test split): the cache that keyed on its input's place, beside the honest two
    public = root / "public"
    make_attack_class(public, only=("alice", "bob", "nearcache"))
    run2 = _judge(public, root / "out_public", "--rounds", "6")
    assert run2.returncode == 0, run2.stderr[-3000:]
    return {**_load(root / "out"), "root": root, "expected": expected, "stdout": run.stdout,
            "public": _load(root / "out_public")}


def _flags(j, name) -> list[str]:
    return j["students"][name]["flags"]


def test_every_attacker_is_judged_flagged_or_rejected_and_the_honest_keep_their_ranks(attacked):
    s, r = attacked["students"], attacked["rejected"]
    assert set(s) | set(r) == set(HONEST + ATTACKERS), (sorted(s), sorted(r))
    for name in HONEST:  # no flag, but the pair flag a copy of alice shares with her (the judge cannot tell who copied)
        assert name in s and [f for f in s[name]["flags"] if f != "same model as ghostcopy (the same weights layer by layer)"] \
            == [], (name, s[name]["flags"])
        assert s[name]["rank"] is not None and s[name]["figures"]["accuracy"]["value"] > 0.9
    # their ranks: among themselves as in a class of their own; and whoever ranks above one of them is honest, a
    # flagged copy of them, or an attacker whose every audit passed: one judged at the work it does (the course CNN
    # computed at its own speed, as nearcache, poison and fatstate do), never one ranked for work it does not do
    # Not reversed. (A rank is 1 + the students separably above: when the two cannot be separated, a third student
    # separably above only the slower one parts their ranks in the class. Under load that happened: alice 1, bob 2
    # beside a pair tie, so equal ranks are not required; the loop below checks who that third student may be.)
    honest = rank_judged({n: s[n]["figures"]["score"] for n in HONEST})
    ranks = (s["alice"]["rank"], s["bob"]["rank"], honest)
    assert not (honest["alice"] < honest["bob"] and s["bob"]["rank"] <= s["alice"]["rank"]), ranks
    assert not (honest["bob"] < honest["alice"] and s["alice"]["rank"] <= s["bob"]["rank"]), ranks

    def judged_at_its_work(n: str) -> bool:
        a = s[n]["figures"]["audits"]
        return (not a["no_caching"]["optimized"]["faster_on_repeats"] and a["test01"]["optimized"]["passed"]
                and a["test01"]["baseline"]["passed"] and not s[n]["figures"]["accuracy"]["timed"]["differs"])

    for h in HONEST:
        above = [n for n in s if n not in HONEST and s[n]["rank"] is not None and s[n]["rank"] < s[h]["rank"]]
        for n in above:
            assert judged_at_its_work(n) or any("same model as" in f and h in f for f in _flags(attacked, n)), (h, n)
        assert not {"nncache", "nnonehot", "prefetch", "heapghost", "combo", "latepoke", "printflood", "mdreject"} & set(above)


def test_caches_are_caught_by_the_audits(attacked):
    """nncache answers near-repeats from what it kept: its stored answers are not what it computes on the exact
    input (TEST01: not ranked), and it is slower on inputs it never met (the no-caching audit). nnonehot's stale
    one-hot answers equal fresh ones, so only the no-caching audit sees it: judged on its new-input figure."""
    s = attacked["students"]
    nn = s["nncache"]
    assert nn["rank"] is None and any(f.startswith("timed outputs differ from a fresh run") for f in nn["flags"])
    t01 = nn["figures"]["audits"]["test01"]["optimized"]
    assert not t01["passed"] and t01["mismatched"] > t01["sampled"] // 2, t01
    one = s["nnonehot"]
    nc = one["figures"]["audits"]["no_caching"]["optimized"]
    assert nc["faster_on_repeats"] and nc["ratio"] > 1.5, nc
    assert any(f.startswith("faster on repeated inputs") for f in one["flags"]), one["flags"]
    # judged on the new-input figure: every timed call scaled to its speed on new inputs
    raw = np.asarray(one["measurements"]["round_mean_ms"]["optimized"])
    assert one["figures"]["latency_median_ms"]["optimized"] == pytest.approx(float(np.median(raw)), rel=1e-6)
    assert one["figures"]["audits"]["test01"]["optimized"]["passed"], "a one-hot cache passes TEST01: TEST04 is needed"
    for name in HONEST + ("nearcache",):  # an honest model is as fast on new inputs, and answers as a fresh one
        a = s[name]["figures"]["audits"]
        assert not a["no_caching"]["optimized"]["faster_on_repeats"] and a["test01"]["optimized"]["passed"], (name, a)


def test_an_input_is_no_key_and_no_window(attacked):
    """Each call gets a tensor of its own: nearcache's place key (storage_offset // 64) is always 0, so it computes
    (judged at its true figure, with or without --data); prefetch can read no other image through its input and
    serves one stale answer at place 0 (wrong, not ranked); poison writes only over its own input."""
    s = attacked["students"]
    for j in (attacked, attacked["public"]):
        near = j["students"]["nearcache"]
        assert near["figures"]["accuracy"]["value"] > 0.9 and not near["figures"]["accuracy"]["timed"]["differs"]
        # Its figure is the course CNN's plus a lookup that misses (about 0.85 of the baseline's speed); a hit answers
        # about 15x faster than the CNN (6.8 vs 104 us a call, measured here), so a cache that hit in the timed
        # rounds is judged far above 2. Not compared with the honest students: bob's int8 model is slower than the
        # float baseline for one 8x8 image a call (about 0.5 of its speed here), so nearcache may rank above him honestly.
        assert near["figures"]["score"]["value"] < 2, (near["figures"]["score"], near["rank"])
    assert attacked["public"]["students"]["alice"]["flags"] == [] == attacked["public"]["students"]["bob"]["flags"]
    pre = s["prefetch"]
    assert pre["rank"] is None and pre["figures"]["accuracy"]["value"] < 0.3, pre["figures"]["accuracy"]
    poison = s["poison"]
    base_acc = {n: s[n]["figures"]["accuracy"]["baseline"] for n in ("poison",) + HONEST}
    assert base_acc["poison"] == base_acc["alice"] == base_acc["bob"], base_acc  # its sandbox's baseline unharmed
    assert poison["figures"]["audits"]["test01"]["baseline"]["passed"]
    assert not poison["figures"]["accuracy"]["timed"]["differs"]


def test_only_counted_bytes_reach_the_model(attacked, tmp_path):
    """heapghost keeps its weights in an uncounted extra record and hunts freed heap for them; its measuring
    process is sent only the records its size counts, so its weights never enter that process: judged at chance,
    unranked. The same for combo (its weights behind nearcache)."""
    from tinytorch.benchmarking.olympics import model_file_bytes
    from tito.olympics.records import counted_archive

    s = attacked["students"]
    for name in ("heapghost", "combo"):
        rec = s[name]
        assert rec["figures"]["accuracy"]["value"] < 0.3 and rec["rank"] is None, (name, rec["figures"]["accuracy"])
        assert any("breaks the rule accuracy" in f for f in rec["flags"]), rec["flags"]
        src = attacked["root"] / "submissions" / name / "model.pt"
        sent = tmp_path / f"{name}.pt"
        counted_archive(src, sent)
        assert bytes(MAGIC) in src.read_bytes() and bytes(MAGIC) not in sent.read_bytes()
        with zipfile.ZipFile(sent) as z:
            assert not [n for n in z.namelist() if "/extra/" in n or n.endswith(".debug_pkl")], z.namelist()
        assert model_file_bytes(sent) == model_file_bytes(src) == (rec["static"]["size_bytes"]["optimized"],
                                                                   rec["static"]["size_method"]["optimized"])


def test_a_copy_hidden_outside_the_state_dict_is_found(attacked):
    """ghostcopy: alice's weights in a list attribute, the non-top scores scrambled: the copy checks read every
    tensor of the counted records, and the error pattern on the probe is hers."""
    s = attacked["students"]
    assert any(f.startswith("same model as") and "alice" in f for f in _flags(attacked, "ghostcopy")), _flags(attacked, "ghostcopy")
    pair = next(p for p in s["ghostcopy"]["same_model"] if "alice" in p["students"])
    assert any("layer by layer" in why for why in pair["why"]), pair
    assert not any("same model" in f for f in _flags(attacked, "alice") + _flags(attacked, "bob") if "ghostcopy" not in f)


def test_what_students_wrote_is_text_on_every_board(attacked, tmp_path, capsys):
    """csvinject's formula and beacon and mdreject's Markdown message: escaped in leaderboard.csv (no cell a
    spreadsheet runs), leaderboard.md (no image, link or line of their own), the claims board and `validate`."""
    from tito.cli import main
    from tito.olympics.leaderboard import leaderboard

    rows = list(csv.DictReader(io.StringIO(attacked["csv"])))
    for row in rows:
        for col in ("participant", "techniques", "flags"):
            assert not row[col].startswith(("=", "+", "-", "@")), (col, row[col])
    inj = next(row for row in rows if row["participant"] == "csvinject")
    assert inj["techniques"].startswith("'=HYPERLINK("), inj["techniques"]
    md = attacked["md"]
    assert BEACON not in md and "](http://attacker" not in md.replace("\\](http://attacker", "")
    assert not any(line.startswith("- alice: copied") or line.startswith("## Rejected") and line != "## Rejected"
                   for line in md.splitlines()), md
    assert "mdreject" in attacked["rejected"] and "\\!\\[beacon\\]" in md
    # the claims board (`olympics leaderboard`) and `validate`
    folder = tmp_path / "claims"
    folder.mkdir()
    shutil.copyfile(attacked["root"] / "submissions" / "csvinject" / "submission.json", folder / "csvinject.json")
    board = leaderboard(folder, EVENT)
    cells = [c for row in csv.reader(io.StringIO(board["csv"])) for c in row]
    assert not any(c.startswith(("=", "+", "@")) for c in cells) and any(c.startswith("'=HYPERLINK") for c in cells)
    assert BEACON not in board["markdown"]
    capsys.readouterr()
    assert main(["olympics", "validate", str(folder / "csvinject.json")]) == 0
    said = capsys.readouterr().out
    assert "formula or markup" in said and "participant" in said and "techniques[0]" in said, said


def test_a_student_costs_the_class_a_bounded_time_and_memory(attacked):
    """slowpoke slows down after its accuracy pass: calibrated slow, its requests stay short (judged at its slow
    figure, at a bounded cost); latepoke is fast on what calibration and the rounds send (near-repeats) and burns CPU
    on every new input: stopped at its CPU budget. fatstate's 180 MB buffer never reaches the judge, whose own
    process stays under JUDGE_MB; printflood's reason says how much it wrote."""
    s, r = attacked["students"], attacked["rejected"]
    slow = s["slowpoke"]
    assert slow["figures"]["speedup"]["value"] < 0.5, slow["figures"]["speedup"]
    assert slow["figures"]["cost"]["cpu_s"] < BUDGET_S
    assert "latepoke" in r and f"over the {BUDGET_S:g} s budget" in r["latepoke"], r.get("latepoke")
    assert "fatstate" in s and attacked["run"]["judge_peak_mb"] < JUDGE_MB, attacked["run"]
    # 2,000 prints of 108 characters a call: said as it happened, with the cap
    assert "printflood" in r and "wrote 216,000 characters of output in 1 call (216,000 per call)" in r["printflood"] \
        and "capped at 100,000" in r["printflood"], r.get("printflood")
    for name in HONEST:  # each student's cost is counted and reported
        cost = s[name]["figures"]["cost"]
        assert 0 < cost["cpu_s"] < BUDGET_S / 3 and cost["wall_s"] > 0, cost


def test_the_audits_are_on_the_board_for_every_student(attacked):
    md = attacked["md"]
    audits = md[md.index("## Audits"):md.index("## Rejected") if "## Rejected" in md else None]
    assert "TEST04" in audits and "TEST01" in audits and "TEST05" in audits
    for name in attacked["students"]:
        line = next((ln for ln in audits.splitlines() if ln.startswith(f"| {name} |")), None)
        assert line is not None and line.count("|") == 6 and "ms" in line, (name, line)
    inputs = attacked["run"]["inputs"]
    assert inputs["audit_pool"] == 100 and inputs["judged_images"] == 200 and inputs["set_images"] == 300


def test_a_round_sends_each_model_fresh_tensors_in_a_secret_order():
    """The plan: every draw from the run's secret seed; a request's images drawn without replacement; the audit pool
    never among the judged images; another seed, another order and other images."""
    from tito.olympics.inputs import Plan

    X = np.random.default_rng(0).random((450, 1, 8, 8)).astype(np.float32)
    a, b = Plan(450, secret=1, rounds=12), Plan(450, secret=2, rounds=12)
    assert not set(a.audit_pool) & set(a.judged) and len(a.audit_pool) + len(a.judged) == 450
    idx, imgs = a.stream(X, 0, len(a.judged))
    assert sorted(idx.tolist()) == sorted(a.judged.tolist()), "one pass: every judged image once"
    assert not np.array_equal(imgs, X[idx]), "each with a noise of its own"
    again, _ = a.stream(X, 0, len(a.judged))
    assert np.array_equal(idx, again), "one seed, one draw (a resumed run sees the same images)"
    assert not np.array_equal(idx, b.stream(X, 0, len(b.judged))[0]) and not np.array_equal(a.audit_pool, b.audit_pool)
    new = np.concatenate([a.audit_new(X, s)[0] for s in range(len(a.audit_rounds))])
    assert len(set(new.tolist())) == len(new) and set(new.tolist()) <= set(a.audit_pool.tolist())
    assert len(set(a.audit_rounds)) == len(a.audit_rounds) == 12, "one audit round each, among the 12"
    places = a.audit_places(0, 200)
    assert len(places) == a.audit_calls and len(set(places.tolist())) == len(places) and places.max() < 200
    assert len(a.audit_places(0, 8)) == 4, "at most half of a request's calls"


def test_every_tensor_of_the_counted_records_is_read(tmp_path):
    """records.file_tensors: parameters, tensors in a list attribute and frozen constants alike, in their shapes;
    an extra file's bytes are not among them (not counted, never sent)."""
    import torch

    from fixtures.olympics_attacks import GhostCopy, _weights
    from tinytorch.benchmarking.digits import default_digits_model
    from tito.olympics.records import file_tensors, summarize

    base = default_digits_model().eval()
    path = tmp_path / "ghost.pt"
    torch.jit.save(torch.jit.script(GhostCopy(_weights(base))), str(path), _extra_files={"w.bin": b"\x00" * 4096})
    found = {tuple(t.shape) for _, t in file_tensors(path.read_bytes())}
    assert {(16, 1, 3, 3), (32, 16, 3, 3), (10, 128)} <= found, found
    frozen = tmp_path / "frozen.pt"
    torch.jit.save(torch.jit.freeze(torch.jit.script(base)), str(frozen))
    shapes = {tuple(t.shape) for _, t in file_tensors(frozen.read_bytes())}
    assert (32, 16, 3, 3) in shapes, shapes  # constants.pkl's tensors too
    sums = summarize(file_tensors(path.read_bytes()))
    assert all(t["sig"].dtype == np.float32 and t["sig"].size <= 256 for t in sums)


def test_the_audit_rules_on_made_up_measurements():
    from tito.olympics.audits import no_caching, test01
    from tito.olympics.copies import departure_agreement

    rng = np.random.default_rng(0)
    same = rng.normal(40.0, 4.0, 10).tolist()
    assert not no_caching(same, rng.normal(40.0, 4.0, 10).tolist(), students=20)["faster_on_repeats"]
    slow = no_caching((3 * np.asarray(same)).tolist(), same, students=20)
    assert slow["faster_on_repeats"] and slow["ratio"] > 2.5 and slow["alpha"] == pytest.approx(0.05 / 20)
    assert no_caching([1.0] * 4, [1.0] * 10) is None
    out = rng.normal(size=(32, 10))
    assert test01(out, out.copy())["passed"]
    stale = out.copy()
    stale[::4] += 0.1
    got = test01(stale, out)
    assert not got["passed"] and got["mismatched"] == 8
    ref = np.zeros(1000, int)
    a = ref.copy()
    a[:30] = 1
    assert departure_agreement(a, a.copy(), ref) == (1.0, 30)
    b = ref.copy()
    b[20:50] = 2
    share, n = departure_agreement(a, b, ref)
    assert n == 50 and share == 0.0


# ---- the model server, request by request (red team 42, round 2: `lazyclock`) ---------------------------------

def _server(monkeypatch):
    "tito/olympics/server.py's Server, imported as the sandbox stages it (protocol and records beside it)."
    import socket

    import tito.isolation
    import tito.olympics

    monkeypatch.syspath_prepend(str(Path(tito.isolation.__file__).parent))
    monkeypatch.syspath_prepend(str(Path(tito.olympics.__file__).parent))
    from tito.olympics import server

    a, b = socket.socketpair()
    return server, server.Server(a), (a, b)


def _scripted_bytes(module) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    return buf.getvalue()


def test_an_answer_filled_in_by_a_later_call_is_judged_as_it_was_returned(monkeypatch):
    """A model that answers each call with a zero placeholder and fills every placeholder of the request by one
    batched forward in its last call (red team 42's `lazyclock`, its clock taken away: it counts calls) was judged
    right and ranked first, because the server read the outputs after the request. Each call's answer is now copied
    as soon as the call returns: the placeholders read as the zeros they were, in the timed request and the accuracy
    pass alike, while an honest model's answers are unchanged."""
    import torch

    from fixtures.olympics_lazy import Deferring
    from tito.isolation import protocol

    server, srv, socks = _server(monkeypatch)
    torch.manual_seed(0)
    lazy = Deferring(3)
    x = [torch.rand(1, 1, 8, 8) for _ in range(3)]
    with torch.no_grad():
        want = lazy.lin(torch.cat(x).flatten(1)).numpy()
    srv.files["optimized"] = bytearray(_scripted_bytes(lazy))
    srv.handle({"op": "load", "models": {"optimized": "optimized.pt"}, "sample": [1, 8, 8], "classes": 10})
    srv.staged = [t.clone() for t in x]
    srv.handle({"op": "time", "role": "optimized"})
    timed = protocol.decode(srv.handle({"op": "outputs"})["outputs"], refs=None)
    srv.staged = [t.clone() for t in x]
    predicted = protocol.decode(srv.handle({"op": "predict", "role": "optimized"})["outputs"], refs=None)
    for got in (timed, predicted):
        assert np.all(got[:2] == 0), "the deferred calls answered zeros when they returned"
        assert np.allclose(got[2], want[2], atol=1e-6), "the request's last call answered itself"
        assert not np.allclose(got, want, atol=1e-3)
    srv.files["honest"] = bytearray(_scripted_bytes(lazy.lin.eval()))  # the same weights, answering each call
    srv.handle({"op": "load", "models": {"honest": "honest.pt"}, "sample": [64], "classes": 10})
    srv.staged = [t.reshape(1, 64).clone() for t in x]
    srv.handle({"op": "time", "role": "honest"})
    assert np.allclose(protocol.decode(srv.handle({"op": "outputs"})["outputs"], refs=None), want, atol=1e-6)
    for s in socks:
        s.close()


@pytest.mark.parametrize("what", ["clock", "save", "from_file"])
def test_a_model_that_reads_a_clock_or_files_is_refused(monkeypatch, what):
    """TorchScript can reach a clock (`torch.ops.prim.TimePoint`: how `lazyclock` found where a timed request ends)
    and files (`torch.save`, `torch.from_file`): a model file that calls any of them is refused at load, saying
    which and why; the course's own model loads. (A forked task is left to the CPU check: the class's spinner.)"""
    import torch

    from fixtures.olympics_lazy import FORBIDDEN
    from tinytorch.benchmarking.digits import default_digits_model

    server, srv, socks = _server(monkeypatch)
    op = {"clock": "prim::TimePoint", "save": "aten::save", "from_file": "aten::from_file"}[what]
    srv.files["optimized"] = bytearray(_scripted_bytes(FORBIDDEN[what]()))
    with pytest.raises(ValueError, match=f"optimized model: its TorchScript code calls {op}, which"):
        srv.handle({"op": "load", "models": {"optimized": "optimized.pt"}, "sample": [1, 8, 8], "classes": 10})
    buf = io.BytesIO()
    with torch.no_grad():
        torch.jit.save(torch.jit.trace(default_digits_model().eval(), torch.zeros(1, 1, 8, 8)), buf)
    srv.files["baseline"] = bytearray(buf.getvalue())
    assert srv.handle({"op": "load", "models": {"baseline": "baseline.pt"}, "sample": [1, 8, 8], "classes": 10})["kinds"]
    assert server.REFUSED_CODE.search("    t = ops.prim.TimePoint()\n") and not server.REFUSED_CODE.search(
        "    _0 = torch.relu(torch.linear(x, w, b))\n")
    for s in socks:
        s.close()
