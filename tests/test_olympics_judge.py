"""`tito olympics judge`: a class of submissions measured here, in one run, with student files only in sandboxes.

The fixture class (tests/fixtures/olympics_class.py): two honest students with different optimizations,
a copy, an inflated claim, a malicious pickle, and one folder for each kind of bad input.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fixtures.olympics_class import EVENT, PWNED, WEIRD_NAME, make_class
from tinytorch.benchmarking.digits import default_digits_model
from tinytorch.benchmarking.olympics import (SIZE_METHOD, judged_figures, model_state, rank_judged, state_dict_sha256,
                                             weights_sha256)
from tito.olympics.claims import check_claims
from tito.olympics.copies import similar_models, state_summaries
from tito.olympics.leaderboard import judged_leaderboard, leaderboard
from tinytorch.benchmarking.optimize import quantize_int8
from tito.config import TitoError
from tito.isolation.sanitize import md_cell
from tito.isolation import sandbox

ROUNDS = 12
HELD_OUT = 300  # images of the instructor's held-out set the fixture class is judged on
PASSED = 200    # of them, the accuracy pass's (the other 100: the no-caching audit's pool, which timed calls meet first)


class Listener:
    """A TCP server on localhost that records every connection (the malicious pickle dials it)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.hits: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits.append(conn.recv(100))
            conn.close()


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    from tito.cli import main

    if sandbox.find() is None:
        pytest.skip("the judge needs bubblewrap (apt-get install bubblewrap)")
    root = tmp_path_factory.mktemp("olympics")
    listener = Listener()
    expected = make_class(root / "submissions", listener.port)
    # an instructor's held-out set (issue 32): images none of the lookup student's table holds (train-split images
    # stand in for it here)
    from tinytorch.benchmarking.digits import load_digits_split

    X, y = load_digits_split("train")
    np.savez(root / "held_out.npz", images=X[:HELD_OUT].numpy(), labels=y[:HELD_OUT].numpy())
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    t0 = time.perf_counter()
    code = main(["olympics", "judge", str(root / "submissions"), "--event", EVENT, "--output-dir", str(root / "out"),
                 "--jobs", "2", "--rounds", str(ROUNDS), "--timeout", "20", "--data", str(root / "held_out.npz")])
    seconds = time.perf_counter() - t0
    print(f"judged the fixture class in {seconds:.1f} s")
    listener.sock.close()
    out = root / "out"
    return {"root": root, "out": out, "code": code, "expected": expected, "listener": listener, "before": before,
            "seconds": seconds, "students": {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")},
            "rejected": json.loads((out / "rejected.json").read_text())}


def _flags(judged, name):
    return judged["students"][name]["flags"]


def test_the_judge_ranks_the_honest_students_by_its_own_measurement(judged):
    assert judged["code"] == 0
    s = judged["students"]
    assert set(s) == {"alice", "bob", "carol", "dave", "frozen", "permuter", "speedy", "liar", "hoarder", "counter",
                      "ownbase", "renamer", "lookup", "disguised", "copycat"}, judged["rejected"]
    # memory_challenge: bob's int8 model is smaller than alice's pruned one (pruning keeps the zeros' bytes)
    assert s["bob"]["rank"] == 1 and s["alice"]["rank"] > 1, {n: r["rank"] for n, r in s.items()}
    assert s["bob"]["figures"]["score"]["value"] > 1.3 > 1.05 > s["alice"]["figures"]["score"]["value"]
    for name in ("alice", "bob"):
        rec = s[name]
        assert rec["timing"]["rounds"] == ROUNDS and len(rec["measurements"]["round_mean_ms"]["optimized"]) == ROUNDS
        assert not [f for f in rec["flags"] if "contradicted" in f], rec["claims"]
        count = rec["figures"]["accuracy"]["count"]  # the accuracy pass's images, and the audit pool's that timed
        # calls met first (a request of k calls holds at most k / 2 of them: with a small k some are never sent)
        assert rec["figures"]["accuracy"]["value"] > 0.9 and PASSED < count <= HELD_OUT, count
        assert count == rec["timing"]["images_judged"]
    # sizes by one definition whatever the format: bob's TorchScript holds its int8 weights where the
    # state dict does not look; the judge counts them
    assert s["bob"]["static"]["kinds"]["optimized"] == "TorchScript"
    assert s["alice"]["static"]["kinds"]["optimized"] == "pickled module, measured as its TorchScript trace"
    n_params = sum(p.numel() for p in default_digits_model().parameters())
    alice, bob = (s[n]["static"]["size_bytes"]["optimized"] for n in ("alice", "bob"))
    assert 4 * n_params < alice < 4 * n_params + 8_000, "fp32 tensors, pruned or not, with the trace's code"
    assert n_params < bob < alice * 0.8, "int8 weights and fp32 biases, with the quantized layers' code"
    board = (judged["out"] / "leaderboard.md").read_text()
    assert board.index("| bob |") < board.index("| alice |") and "judged" in board
    csv = (judged["out"] / "leaderboard.csv").read_text().splitlines()
    assert csv[0].startswith("rank,tied,participant,score,ci_lower,ci_upper,accuracy,latency_median_ms,size_bytes")
    assert (judged["out"] / "class.png").stat().st_size > 10_000


def test_copies_and_false_claims_are_flagged(judged):
    assert any(f.startswith("same model as") and "carol" in f and "identical weights" in f for f in _flags(judged, "alice"))
    assert any(f.startswith("same model as") and "alice" in f for f in _flags(judged, "carol"))
    dave = judged["students"]["dave"]
    speed = next(c for c in dave["claims"] if c["claim"] == "speedup")
    assert speed["contradicted"] and speed["claimed"] > 5 > 2 > speed["judged"], speed
    assert any(f.startswith("claim contradicted: speedup claimed") for f in dave["flags"])


def _same_round_ratio(students, a, b):
    """Median over rounds of a's optimised time / b's in the same round: every round runs every model, so a
    busy spell of the machine slows both sides of each ratio (absolute medians of two students differed 4x
    at a load average of 12 on two cores)."""
    x, y = (np.asarray(students[n]["measurements"]["round_mean_ms"]["optimized"]) for n in (a, b))
    assert len(x) == len(y) == ROUNDS, (len(x), len(y))
    return float(np.median(x / y))


def test_the_ways_a_red_team_found_are_closed(judged):
    """Each way a red-team session beat the judge's first version, as a student of the fixture class."""
    s, r = judged["students"], judged["rejected"]
    full = 4 * sum(p.numel() for p in default_digits_model().parameters())
    # weights frozen into TorchScript constants are still weights: counted, and the same function as alice's
    assert s["frozen"]["static"]["size_bytes"]["optimized"] > full
    assert any(f.startswith("same model as") and "alice" in f for f in s["frozen"]["flags"])
    # a pickle keeping its model outside the module tree: its trace refuses the hidden weights
    assert "hider" in r and "converted to TorchScript" in r["hider"], r.get("hider")
    # a permuted copy computes the same function (and holds the same weights, layer by layer)
    assert any(f.startswith("same model as") and "alice" in f for f in s["permuter"]["flags"]), s["permuter"]["flags"]
    pair = next(p for p in s["permuter"]["same_model"] if "alice" in p["students"])
    assert any("near-identical outputs" in why for why in pair["why"]) and any("layer by layer" in why for why in pair["why"]), pair
    # a pickle that patches the server runs only where the file is converted: its model is timed as it is
    ratio = _same_round_ratio(s, "speedy", "alice")
    assert 0.3 < ratio < 3, ratio
    # TorchScript with a memory: each round's images are new to it, and the weights it carries as a list count
    # the verdict, not a timing floor: judged for a latency event, the hoarder (alice's model behind a cache that
    # never hits, since each round's images are new) does not rank above alice (a fixed floor on the ratio, 0.7,
    # failed beside a busy machine at 0.55: single requests' times, not the judge's decision)
    hoard = s["hoarder"]
    speed = {n: judged_figures(s[n]["measurements"], "latency_sprint")["score"] for n in ("alice", "hoarder")}
    ranks = rank_judged(speed)
    assert ranks["hoarder"] >= ranks["alice"], (ranks, _same_round_ratio(s, "hoarder", "alice"))
    assert hoard["static"]["size_bytes"]["optimized"] > 2 * s["alice"]["static"]["size_bytes"]["optimized"]
    # a consistent, invented compression claim, whatever its size method says
    assert any(f.startswith("claim contradicted: compression ratio claimed 50") for f in s["liar"]["flags"])
    # names and links: a folder whose name is no student id is refused by grading's rule (tito.isolation.untrusted),
    # named only as an escaped line; nothing of its name reaches a report as structure
    weird = [k for k in r if "eve" in k]
    assert len(weird) == 1 and "as a student id" in r[weird[0]] and weird[0].isprintable() and "\n" not in weird[0]
    assert "symbolic link" in r["linkbob"]
    board, csv = ((judged["out"] / f"leaderboard.{x}").read_text() for x in ("md", "csv"))
    assert "\x1b" not in board + csv and "<b>" not in board
    assert not any(line.startswith("- alice:") for line in board.splitlines()), "a name wrote a line of its own"
    assert WEIRD_NAME not in board


def test_the_third_red_teams_attacks_are_caught_or_judged_at_their_honest_figure(judged):
    """Issue 32: each attack beside the honest students (alice, bob keep their figures and ranks above)."""
    s, r = judged["students"], judged["rejected"]
    # the timed work is the judged work: a model that returns zeros once its accuracy pass is over is not ranked
    counter = s["counter"]
    assert counter["rank"] is None and any(f.startswith("answers differ when timed") for f in counter["flags"]), counter["flags"]
    timed = counter["figures"]["accuracy"]["timed"]
    assert timed["differs"] and timed["timed"] < 0.3 < 0.9 < timed["pass"], timed
    # and its judged accuracy is its timed calls' (a switch within the 2-point floor is judged at what it timed)
    assert counter["figures"]["accuracy"]["value"] < 0.3, counter["figures"]["accuracy"]
    for name in ("alice", "bob"):  # honest models answer the same when timed
        t = s[name]["figures"]["accuracy"]["timed"]
        assert not t["differs"] and t["calls"] >= ROUNDS and abs(t["timed"] - t["pass"]) < 0.02, (name, t)
    # one baseline: a slow, fat baseline of a student's own is reported apart, never the denominator
    own = s["ownbase"]
    assert own["figures"]["own_baseline"]["accepted"] is False
    assert own["figures"]["own_baseline"]["size_bytes"] > 2 << 20
    assert any(f.startswith("own baseline is not the course model") for f in own["flags"]), own["flags"]
    course = s["alice"]["static"]["size_bytes"]["baseline"]
    assert own["static"]["size_bytes"]["baseline"] == course, "the course baseline is every student's denominator"
    assert 0.9 < own["figures"]["compression_ratio"]["value"] < 1.1, own["figures"]["compression_ratio"]
    assert own["figures"]["speedup"]["value"] < 3, own["figures"]["speedup"]
    # every byte counted: renaming the tensor records to look like debug information changes nothing
    bob, renamer = (s[n]["static"]["size_bytes"]["optimized"] for n in ("bob", "renamer"))
    assert bob <= renamer < bob * 1.01, (bob, renamer)
    # a lookup table of the public test split: judged on the instructor's held-out set, it knows no image (without
    # --data, the round's noise defeats its rounding: test_the_round_noise_defeats_a_lookup_table...)
    assert s["lookup"]["figures"]["accuracy"]["value"] < 0.3 and s["lookup"]["rank"] is None
    assert f"held-out set held_out.npz ({HELD_OUT} images)" in (judged["out"] / "leaderboard.md").read_text()
    # a copy with an extra element and a softmax on its outputs
    assert any(f.startswith("same model as") and "alice" in f for f in s["disguised"]["flags"]), s["disguised"]["flags"]
    assert not any("same model" in f and "bob" in f for f in s["alice"]["flags"]), "honest students stay apart"
    # a copy with permuted channels and every weight scaled by 1 + 2% noise: the same weights, unit by unit
    assert any(f.startswith("same model as") and "alice" in f for f in s["copycat"]["flags"]), s["copycat"]["flags"]
    assert not any("same model" in f and "copycat" in f for f in s["bob"]["flags"] + s["ownbase"]["flags"])
    # a neighbour that spins between its requests is rejected before it can slow anyone's timed rounds
    assert "spinner" in r and "CPU outside its own requests" in r["spinner"], r.get("spinner")


def test_a_malicious_pickle_is_rejected_and_changes_nothing(judged):
    root = judged["root"]
    assert "mallory" not in judged["students"]
    assert "loading the optimized model file" in judged["rejected"]["mallory"], judged["rejected"]
    assert not (root / "submissions" / PWNED).exists()
    assert judged["listener"].hits == [], "the pickle reached the network"
    after = sorted(p.relative_to(root) for p in root.rglob("*") if "out" not in p.relative_to(root).parts)
    assert after == judged["before"], "something outside the output folder changed"


def test_each_bad_submission_has_a_clear_line(judged):
    r = judged["rejected"]
    assert "no model file" in r["empty"]
    assert "notamodel" in r and "loading the optimized model file" in r["notamodel"]
    assert "my model is broken" in r["raiser"]
    assert "non-finite output" in r["nan"] and "test image 0" in r["nan"]
    assert f"expected ({PASSED}, 10)" in r["wide"]
    assert "no answer within 20 s" in r["asleep"]
    board = (judged["out"] / "leaderboard.md").read_text()
    assert "## Rejected" in board and all(f"- {md_cell(name)}:" in board for name in r)  # names as escaped text


def test_the_claims_leaderboard_says_what_it_ranks(judged):
    folder = judged["root"] / "claims"
    folder.mkdir()
    shutil.copyfile(judged["root"] / "submissions" / "alice" / "submission.json", folder / "alice.json")
    assert "self-reported claims" in leaderboard(folder, EVENT)["markdown"]


def _tree_cores(pid: int) -> dict[str, set[int]]:
    """Program name -> every core a thread of a process of that name, `pid` or its descendants, may run on:
    read from /proc (the sandbox seen from outside)."""
    cores: dict[str, set[int]] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            name = Path(f"/proc/{p}/comm").read_text().strip()
            threads = os.listdir(f"/proc/{p}/task")
        except (FileNotFoundError, ProcessLookupError):  # it ended while we read: it runs nowhere
            continue
        for t in threads:
            try:
                cores.setdefault(name, set()).update(os.sched_getaffinity(int(t)))
                todo += [int(c) for c in Path(f"/proc/{p}/task/{t}/children").read_text().split()]
            except (FileNotFoundError, ProcessLookupError):  # a thread that ended while we read
                continue
    return cores


def test_a_sandbox_imports_on_every_core_and_is_timed_on_one(tmp_path):
    """A class's sandboxes start at once: their imports may use every core (pinned to one from the start, 12
    of them took 29.6 s beside a CPU hog); once ready, each model's process (and what it starts later) is on the
    judge's measuring core only, and a student's time limits start then. bwrap's own processes only wait."""
    from tito.olympics.sandboxes import Student, start, stop, wait_ready
    from tito.olympics.staging import prepare_work, stage

    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        pytest.skip("needs two cores")
    work = tmp_path / "work"
    work.mkdir()
    data = prepare_work(work)
    st = Student("solo", tmp_path)
    stage(st, work, 0)
    start(st, work, data, sandbox.find(), roles=("baseline", "optimized"))
    try:
        assert st.cpu == max(mine) and set(map(frozenset, _tree_cores(st.proc.pid).values())) == {frozenset(mine)}
        wait_ready(st)
        cores = _tree_cores(st.proc.pid)
        assert cores["tito-baseline"] == cores["tito-optimized"] == {max(mine)}, cores
        assert set(st.pids) == {"baseline", "optimized"}, "each model's process found from outside by its name"
    finally:
        stop(st)


class _Reader(torch.nn.Module):
    """A model that reads a file's bytes as it runs (red team s38: weights borrowed from the course baseline's
    file, or from uncounted records of its own file, made a 2 KB model the memory challenge's winner)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        borrowed = torch.from_file(self.path, shared=False, size=64, dtype=torch.uint8).float()
        return self.head(x.flatten(1) + borrowed[:64] * 0)


def test_a_measured_model_that_reads_a_file_is_refused_at_load(tmp_path):
    """A model that reads a file as it runs (`torch.from_file`: red team s38 borrowed weights from the course
    baseline's file, or from uncounted records of its own) is refused when its sandbox loads it, saying why
    (red team 42, round 2: file I/O is no part of a model); before, the sandbox's missing files stopped it (no model
    file is ever in a measuring sandbox: `records.counted_archive`). The whole path, in a real sandbox."""
    from tito.olympics.measure import load
    from tito.olympics.sandboxes import TIMEOUTS, Student, StudentError, start, stop, wait_ready
    from tito.olympics.staging import find_files, prepare_work, stage

    box = sandbox.find()
    if box is None:
        pytest.skip("needs bubblewrap: without a sandbox every file is the judge's to read")
    work = tmp_path / "work"
    work.mkdir()
    data = {**prepare_work(work), "timeouts": TIMEOUTS}  # as run_judge completes it
    folder = tmp_path / "reader"
    folder.mkdir()
    (folder / "submission.json").write_text(json.dumps({"models": {}}))
    st = Student("reader", folder)
    st.stage = work / "students" / "s0000"  # where stage() puts it: the path the model is built to read
    inside = box.inside_path("course", work / "course") + "/baseline.pt"
    torch.jit.script(_Reader(inside)).save(str(folder / "mine.pt"))
    find_files(st)
    stage(st, work, 0)
    start(st, work, data, box, roles=("baseline", "optimized"))
    try:
        wait_ready(st)
        with pytest.raises(StudentError, match=r"optimized model: its TorchScript code calls aten::from_file, which reads a file"):
            load(st, work, data, box)
    finally:
        stop(st)


def test_files_the_judge_will_not_read(tmp_path):
    from tito.olympics.sandboxes import Student, StudentError
    from tito.olympics.staging import find_files

    def folder(name, files):
        d = tmp_path / name
        d.mkdir()
        (d / "submission.json").write_text(json.dumps({"models": {}}))
        for f, target in files.items():
            if target is None:
                (d / f).write_bytes(b"x")
            else:
                (d / f).symlink_to(target)
        return Student(name, d)

    with pytest.raises(StudentError, match="not a regular file"):
        find_files(folder("linker", {"model.pt": "/etc/passwd"}))
    with pytest.raises(StudentError, match="several model files"):
        find_files(folder("two", {"a.pt": None, "b.pt": None}))
    onnx_student = folder("onnx", {"m.onnx": None})  # judged since issue 35 (the sandbox says what is wrong with it)
    find_files(onnx_student)
    assert onnx_student.files["optimized"].name == "m.onnx"
    with pytest.raises(TitoError, match="--rounds"):
        from tito.olympics.judge import judge_class
        judge_class(tmp_path, EVENT, tmp_path / "o", rounds=2)


def test_model_state_sees_the_int8_weights_of_torchscript():
    "TorchScript's state dict leaves packed int8 weights out; two different int8 models must not share a hash."
    base = default_digits_model()
    calib = [torch.randn(8, 1, 8, 8, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    a = torch.jit.trace(quantize_int8(base, "static", calibration_data=calib), torch.zeros(1, 1, 8, 8))
    other = default_digits_model()
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(0.5)
    b = torch.jit.trace(quantize_int8(other, "static", calibration_data=calib), torch.zeros(1, 1, 8, 8))
    assert set(a.state_dict()) == set(b.state_dict()) and len(a.state_dict()) < 4, "the gap this closes"
    assert weights_sha256(a) != weights_sha256(b)
    st = model_state(a)
    packed = [v for k, v in st.items() if k.endswith("_packed_params")]
    assert len(packed) == 3 and all(isinstance(v, tuple) and v[0].is_quantized for v in packed)
    n_weights = sum(v[0].numel() for v in packed)
    assert n_weights == sum(p.numel() for n, p in base.named_parameters() if n.endswith("weight"))
    assert state_dict_sha256(st) == weights_sha256(a)


def test_state_dict_tensor_bytes_sees_torchscripts_int8_weights():
    "results.state_dict_tensor_bytes: int8 weights counted whether eager or TorchScript."
    from tinytorch.benchmarking.results import state_dict_tensor_bytes
    base = default_digits_model()
    calib = [torch.randn(8, 1, 8, 8, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    eager = quantize_int8(base, "static", calibration_data=calib)
    scripted = torch.jit.trace(eager, torch.zeros(1, 1, 8, 8))
    int8_weights = sum(p.numel() for n, p in base.named_parameters() if n.endswith("weight"))  # 1 byte each
    plain_state = sum(t.numel() * t.element_size() for t in scripted.state_dict().values())
    got = state_dict_tensor_bytes(scripted)
    assert got >= plain_state + int8_weights, f"TorchScript int8: expected >= {plain_state} + {int8_weights}, got {got}"
    assert got == state_dict_tensor_bytes(model_state(scripted))
    # eager and TorchScript hold the same integers; they differ only in the few per-layer scalars each format keeps
    assert abs(got - state_dict_tensor_bytes(eager)) < 0.05 * got, (got, state_dict_tensor_bytes(eager))


def test_judging_arithmetic():
    "Ranks by the one rule, claims against measurements, same-model pairs: on measurements made up here."
    rng = np.random.default_rng(0)
    base = 2.0 + 0.3 * rng.random(30)  # 30 rounds of a baseline's latency, with noise

    def record(speedup, acc=0.9):
        correct = [1] * int(acc * 100) + [0] * (100 - int(acc * 100))
        return {"round_mean_ms": {"baseline": base.tolist(), "optimized": (base / speedup * (1 + 0.05 * rng.random(30))).tolist()},
                "correct": {"baseline": [1] * 90 + [0] * 10, "optimized": correct}, "size_bytes": {"baseline": 1000, "optimized": 500}}
    figs = {s: judged_figures(record(sp), "latency_sprint") for s, sp in (("a", 2.0), ("b", 2.01), ("c", 1.2))}
    ranks = rank_judged({s: f["score"] for s, f in figs.items()})
    assert ranks == {"a": 1, "b": 1, "c": 3}, f"a and b differ by 0.5% (under the 2% floor): tied; c is slower: {ranks}"
    assert figs["c"]["score"]["ci_lower"] <= figs["c"]["score"]["value"] <= figs["c"]["score"]["ci_upper"]
    doc = {"models": {"optimized": {"sha256": "0" * 64}}, "improvements": {"speedup": {"value": 10.0}},
           "measurements": {"optimized": {"accuracy": {"accuracy": 0.9}}}}
    claims = {c["claim"]: c for c in check_claims(doc, figs["a"], {"optimized": "0" * 64})}
    assert claims["speedup"]["contradicted"], "a 10x claim against a measured 2x is contradicted"
    assert not claims["optimized accuracy"]["contradicted"] and not claims["optimized weights sha256"]["contradicted"]
    doc["improvements"]["speedup"]["value"] = 2.6  # another machine: 30% off the judge's figure is within tolerance
    assert not {c["claim"]: c for c in check_claims(doc, figs["a"], {})}["speedup"]["contradicted"]
    t = [{"numel": 2000, "shape": [2000], "sig": np.linspace(-1, 1, 256).astype(np.float32)}]
    other = [{"numel": 2000, "shape": [2000], "sig": np.linspace(0, 2, 256).astype(np.float32)}]
    pairs = similar_models({"a": {"sha256": "x", "tensors": t}, "b": {"sha256": "x", "tensors": other},
                            "c": {"sha256": "y", "tensors": t}, "d": {"sha256": "z", "tensors": other}})
    assert [p["students"] for p in pairs] == [["a", "b"], ["a", "c"], ["b", "d"]], pairs
    board = judged_leaderboard({s: {"figures": f} for s, f in figs.items()}, "latency_sprint", {"e": "no model file"})
    assert list(board["table"]["participant"])[:2] == ["a", "b"] and "(tied)" in board["markdown"]
    assert "- e: no model file" in board["markdown"]


def test_what_a_sandbox_answers_is_checked_before_it_is_decoded():
    "Values that cost the judge time or memory, or carry no signature, are refused or dropped as that student's."
    import numpy as np

    from tito.olympics.measure import SUMMARY_TAGS, checked_tensors, decode_reply
    from tito.olympics.sandboxes import StudentError
    from tito.olympics.records import MAX_ROWS, SIG_POINTS

    big = 2**61 - 1
    for hostile in ({"$s": [k * big for k in range(1000)]},               # ints with one hash: quadratic to build
                    {"a": {"$nt": {"name": "T", "fields": ["x"], "values": [1]}}},  # a class per name
                    {"$d": [[1, {"$pt": {}}]]},                             # keys that are not names
                    {"a": [[[[[[[[[[1]]]]]]]]]]},                           # deeper than a summary is
                    {"a": {"$pk": "gASVAAAAAAAAAAA="}},                     # pickle
                    {"a": {"$pt": {"dtype": "float32", "shape": [1], "data": "AAAAAA==", "grad": False}}}):  # a tensor
        with pytest.raises(StudentError, match="malformed answer"):
            decode_reply(hostile, SUMMARY_TAGS, "tensors")
    from tito.isolation.protocol import encode
    good = {"numel": 100, "shape": [10, 10], "sig": np.ones(SIG_POINTS, np.float32), "rows": np.ones((10, 8), np.float32)}
    oversized = [{**good, "sig": np.ones(SIG_POINTS + 1, np.float32)}, {**good, "rows": np.ones((MAX_ROWS + 1, 8), np.float32)},
                 {**good, "sig": np.ones(SIG_POINTS, np.float64)}]
    got = checked_tensors(encode([good] + oversized, refs=None))
    assert len(got) == 2 and "rows" in got[0] and "rows" not in got[1], "a signature over the bounds is dropped"


def test_a_submission_of_any_shape_is_that_students_line(tmp_path):
    "Malformed submission JSON never stops the judge: each becomes a reason or an unreadable claim."
    from tito.olympics.sandboxes import Student, StudentError
    from tito.olympics.staging import find_files

    for name, text in (("models_int", json.dumps({"models": {"baseline": 5}})),
                       ("deep", "[" * 100_000 + "]" * 100_000),
                       ("not_object", "[1, 2]")):
        d = tmp_path / name
        d.mkdir()
        (d / "submission.json").write_text(text)
        (d / "a.pt").write_bytes(b"x")
        if name == "models_int":
            find_files(Student(name, d))  # no file named: the folder's only model file
        else:
            with pytest.raises(StudentError):
                find_files(Student(name, d))
    figs = judged_figures({"round_mean_ms": {"baseline": [2.0] * 6, "optimized": [1.0] * 6},
                           "correct": {"baseline": [1, 0], "optimized": [1, 0]},
                           "size_bytes": {"baseline": 100, "optimized": 50}}, EVENT)
    for doc in ({"models": [], "measurements": {"optimized": {"accuracy": {"accuracy": "0.99"}}}},
                {"improvements": {"speedup": {"value": [10]}, "compression_ratio": 7}}, {"models": {"optimized": 5}}):
        claims = check_claims(doc, figs, {"optimized": "0" * 64})
        assert all(c["contradicted"] or c["claimed"] is None for c in claims if c["how"].startswith("unreadable")), claims
    assert [c["claim"] for c in check_claims({"measurements": {"optimized": {"accuracy": {"accuracy": "0.99"}}}}, figs, {})
            if c["contradicted"]] == ["optimized accuracy"]


def test_the_leaderboard_escapes_what_students_wrote():
    figs = judged_figures({"round_mean_ms": {"baseline": [2.0] * 6, "optimized": [1.0] * 6},
                           "correct": {"baseline": [1, 0], "optimized": [1, 0]},
                           "size_bytes": {"baseline": 100, "optimized": 50}}, EVENT)
    board = judged_leaderboard({"ann": {"figures": figs, "techniques": ["x\n# ALL OTHERS DISQUALIFIED\n| 1 | me |"],
                                        "flags": ["claimed <script>alert(1)</script>"]}}, EVENT,
                               {"bob": "reason\n- carol: plagiarism"})
    md = board["markdown"]
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert not any(line.startswith(("# ALL", "- carol", "| 1 | me")) for line in md.splitlines()), md



def test_a_compression_claim_of_two_size_definitions_is_not_trusted():
    "The red team's liar renamed one size method to dodge the check: such a claim is flagged as unchecked."
    figs = judged_figures({"round_mean_ms": {"baseline": [2.0] * 6, "optimized": [1.0] * 6},
                           "correct": {"baseline": [1, 0], "optimized": [1, 0]},
                           "size_bytes": {"baseline": 100, "optimized": 50}}, EVENT)
    doc = {"improvements": {"compression_ratio": {"value": 54.0}},
           "measurements": {"baseline": {"model_size": {"method": "bytes of torch.save(model.state_dict())"}},
                            "optimized": {"model_size": {"method": "measured: bytes of torch.jit.save(model)"}}}}
    (c,) = check_claims(doc, figs, {})
    assert c["unchecked"] and not c["contradicted"] and "two definitions" in c["how"]
    doc["measurements"]["optimized"]["model_size"]["method"] = doc["measurements"]["baseline"]["model_size"]["method"]
    (c,) = check_claims(doc, figs, {})  # one definition, but not the Olympics' (the file's bytes): not checked either
    assert c["unchecked"] and not c["contradicted"] and "not the model files' bytes" in c["how"], c
    for role in ("baseline", "optimized"):
        doc["measurements"][role]["model_size"]["method"] = SIZE_METHOD
    (c,) = check_claims(doc, figs, {})
    assert c["contradicted"] and c["judged"] == 2.0


def test_a_compression_claim_is_read_against_the_same_figure_the_score_divides():
    """One size: a claim divides the model files' bytes (`model_file_bytes`) as the score does. An honest int8
    claim (its files measured in another process: a few bytes of class names apart) stands; 1.5% over does not."""
    record = {"round_mean_ms": {"baseline": [2.0] * 6, "optimized": [1.0] * 6},
              "correct": {"baseline": [1, 0], "optimized": [1, 0]},
              "size_bytes": {"baseline": 28_223, "optimized": 19_638}}
    figs = judged_figures(record, EVENT)
    assert figs["score"]["value"] == pytest.approx(28_223 / 19_638) == figs["compression_ratio"]["value"]
    method = {"model_size": {"method": SIZE_METHOD}}
    for claimed, contradicted in ((28_255 / 19_660, False), (28_223 / 19_638 / 2, False), (1.015 * 28_223 / 19_638, True),
                                  (50.0, True)):
        doc = {"improvements": {"compression_ratio": {"value": claimed}},
               "measurements": {"baseline": method, "optimized": method}}
        (c,) = check_claims(doc, figs, {})
        assert c["contradicted"] is contradicted and c["judged"] == pytest.approx(28_223 / 19_638), (claimed, c)



def test_judged_all_around_interval_resamples_the_images_too():
    "The all-around score's interval: rounds and test images resampled together (retention's uncertainty counts)."
    from tinytorch.benchmarking.olympics import median_interval
    rng = np.random.default_rng(1)
    base = 2.0 + 0.3 * rng.random(20)
    rec = {"round_mean_ms": {"baseline": base.tolist(), "optimized": (base / 2 * (1 + 0.05 * rng.random(20))).tolist()},
           "correct": {"baseline": [1] * 90 + [0] * 10, "optimized": [1] * 85 + [0] * 15},
           "size_bytes": {"baseline": 1000, "optimized": 500}}
    f = judged_figures(rec, "all_around")
    s, rounds_only = f["score"], median_interval(f["score"]["samples"], 0)
    assert s["ci_lower"] < rounds_only[0] and s["ci_upper"] > rounds_only[1], (s, rounds_only)
    assert s["ci_lower"] <= s["value"] <= s["ci_upper"]
    lo, hi = f["latency_median_ms"]["optimized_ci"]
    assert lo <= f["latency_median_ms"]["optimized"] <= hi and lo < hi


def test_the_size_is_what_the_loader_reads_found_by_key(tmp_path):
    """Issue 32: renaming the tensor records (and the keys that name them) to look like debug information, or
    adding records nothing refers to, changes nothing; the renamed model still loads and computes the same."""
    from fixtures.olympics_class import rename_records
    from tinytorch.benchmarking.olympics import model_file_bytes
    import zipfile

    base = default_digits_model()
    plain = tmp_path / "base.pt"
    torch.jit.save(torch.jit.trace(base, torch.zeros(1, 1, 8, 8)), str(plain))
    renamed = tmp_path / "renamed.pt"
    rename_records(plain, renamed)
    x = torch.rand(3, 1, 8, 8)
    assert torch.equal(torch.jit.load(str(renamed))(x), base(x)), "the attack must load to mean anything"
    size, how = model_file_bytes(plain)
    tensors = 4 * sum(p.numel() for p in base.parameters())
    assert tensors < size < tensors + 8_000 and "by key" in how, (size, how)
    assert model_file_bytes(plain.read_bytes()) == (size, how), "the file or its bytes: one figure"
    # traced again in this process, its classes are named `___torch_mangle_<n>`: the prefix does not count, its digits do
    again = tmp_path / "again.pt"
    torch.jit.save(torch.jit.trace(base, torch.zeros(1, 1, 8, 8)), str(again))
    with zipfile.ZipFile(again) as z:
        assert b"___torch_mangle_" in z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    assert abs(model_file_bytes(again)[0] - size) < 0.005 * size, (model_file_bytes(again), size)
    # the prefix hides nothing: digits after it count, and a record named twice gets no discount at all
    for name, body, extra in (("digits.py", b"___torch_mangle_123" * 1000, 3000), ("twice.py", b"___torch_mangle_" * 1000, 16_000)):
        padded = tmp_path / name.replace(".py", ".pt")
        shutil.copyfile(plain, padded)
        with zipfile.ZipFile(padded, "a") as z, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile's "Duplicate name"
            for _ in range(1 + (name == "twice.py")):
                z.writestr(f"base/code/__torch__/{name}", body)
        assert model_file_bytes(padded)[0] == size + extra, (name, model_file_bytes(padded), size)
    keys = 6  # each key grew by len(".debug_pkl") in data.pkl: the only change, and it only adds
    assert model_file_bytes(renamed)[0] == size + keys * len(".debug_pkl")
    # an extra record nothing refers to, a debug record, a traced input: not read by the loader, not counted
    padded = tmp_path / "padded.pt"
    shutil.copyfile(plain, padded)
    with zipfile.ZipFile(padded, "a") as z:
        z.writestr("base/extra/notes.txt", b"x" * 50_000)
        z.writestr("base/data/99", b"x" * 50_000)
    assert model_file_bytes(padded)[0] == size
    # the same record name twice: whichever the loader reads, the larger counts
    twice = tmp_path / "twice.pt"
    shutil.copyfile(plain, twice)
    with zipfile.ZipFile(twice, "a") as z, pytest.warns(UserWarning, match="Duplicate name"):
        z.writestr("base/data/2", b"x" * 90_000)
    assert model_file_bytes(twice)[0] > size + 60_000
    # a pickle the walk cannot follow (or one too big to walk): every record of the archive counts
    odd = tmp_path / "odd.pt"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(odd, "w") as z:
        for i in src.infolist():
            z.writestr(i.filename.replace("base/", "odd/"), b"\x80\x02(X\x01\x00\x00\x000Q." if i.filename.endswith("data.pkl")
                       else src.read(i.filename))
        total = sum(i.file_size for i in z.infolist())
    got, how = model_file_bytes(odd)
    assert got == total and "every record" in how, (got, total, how)


def test_copies_are_found_through_disguises_and_honest_models_stay_apart():
    """Issue 32: a copy with an extra element, renamed and reordered tensors, and a softmax on its outputs is the
    same model (per-tensor signatures; class-score order); pruned, int8 and the baseline are told apart."""
    from fixtures.olympics_class import _permuted
    from tinytorch.benchmarking.digits import load_digits_split
    from tito.olympics.copies import RANK_DISCORDANCE, rank_agreement, shared_weights
    from tinytorch.benchmarking.optimize import prune_magnitude

    base = default_digits_model()
    X, _ = load_digits_split("test")
    calib = load_digits_split("train")[0][:256].split(64)
    models = {"base": base, "pruned": prune_magnitude(base, 0.5),
              "int8": torch.jit.trace(quantize_int8(base, "static", calibration_data=calib), torch.zeros(1, 1, 8, 8))}
    sums = {k: state_summaries(model_state(m)) for k, m in models.items()}
    # the disguise: tensors renamed and reordered, one reshaped, one extra element, channels permuted
    disguised = {f"z{i}": v for i, (k, v) in enumerate(reversed(list(model_state(_permuted(models["pruned"])).items())))}
    disguised["z0"] = disguised["z0"].reshape(-1)
    disguised["extra"] = torch.ones(1)
    sums["mask"] = state_summaries(disguised)
    assert shared_weights(sums["pruned"], sums["mask"]) == 1.0
    for a, b in (("pruned", "int8"), ("pruned", "base"), ("int8", "base")):
        assert shared_weights(sums[a], sums[b]) < 0.5, (a, b)
    with torch.inference_mode():
        outs = {k: m(X).double().numpy() for k, m in models.items()}
    soft = torch.softmax(torch.from_numpy(outs["pruned"]), 1).numpy()
    assert rank_agreement(outs["pruned"], soft) == (1.0, 0.0)
    for a, b in (("pruned", "int8"), ("int8", "base")):  # int8 vs base: the closest honest pair, 5.5x the threshold
        assert rank_agreement(outs[a], outs[b])[1] > 5 * RANK_DISCORDANCE, (a, b)
    models_ = {"alice": {"sha256": "a", "tensors": sums["pruned"]}, "mask": {"sha256": "m", "tensors": sums["mask"]},
               "bob": {"sha256": "b", "tensors": sums["int8"]}, "carl": {"sha256": "c", "tensors": sums["base"]}}
    pairs = similar_models(models_, {"alice": outs["pruned"], "mask": soft, "bob": outs["int8"], "carl": outs["base"]},
                           reference={"tensors": sums["base"]})  # int8 is 0.008 from the course baseline: no copy
    assert [p["students"] for p in pairs] == [["alice", "mask"]], pairs
    assert any("layer by layer" in w for w in pairs[0]["why"]) and any("order" in w for w in pairs[0]["why"])


def test_a_copy_with_permuted_units_and_noise_is_found_and_the_course_models_stay_apart():
    """Issue 32: a copy whose channels are permuted and whose every weight is scaled by 1 + 2% noise is flagged; the
    course baseline, its int8 and its pruned versions are not (int8 is 0.8% from the baseline, closer than the copy:
    the baseline-relative rule keeps them apart). Measured on the bounded signatures the judge receives
    (docs/performance.md, "Olympics judge"): 2% copies 0.017, 4% 0.031; honest pairs 0.122 (30%-pruned vs int8)
    and up (rows at unit norm; 0.080 before)."""
    from fixtures.olympics_class import _noisy, _permuted
    from tito.olympics.copies import UNIT_DISTANCE, unit_distance
    from tinytorch.benchmarking.optimize import prune_magnitude

    base = default_digits_model()
    calib = [torch.randn(8, 1, 8, 8, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    models = {"base": base, "p30": prune_magnitude(base, 0.3), "p50": prune_magnitude(base, 0.5),
              "int8": quantize_int8(base, "static", calibration_data=calib)}
    models["copy"] = _noisy(_permuted(models["p50"]))
    sig = {k: state_summaries(model_state(m)) for k, m in models.items()}
    assert unit_distance(sig["p50"], state_summaries(model_state(_permuted(models["p50"])))) < 1e-6
    assert unit_distance(sig["p50"], sig["copy"]) < UNIT_DISTANCE / 2
    assert unit_distance(sig["p30"], sig["int8"]) > 1.5 * UNIT_DISTANCE
    pairs = similar_models({k: {"sha256": k, "tensors": sig[k]} for k in models}, reference={"tensors": sig["base"]})
    assert [p["students"] for p in pairs] == [["copy", "p50"]], pairs
    assert "hidden units' order" in pairs[0]["why"][0]


def test_students_who_each_follow_a_course_recipe_are_not_copies_of_each_other():
    """Red team 42, round 2: per-channel int8 weights do not depend on the calibration images, and magnitude
    pruning has no randomness, so two students who each int8 (or 50%-prune) the course model have identical weights
    and were flagged "same model (identical weights)". The judge makes those recipes' results itself
    (`course_recipes`): a pair sharing one of them is no copy; a pair sharing weights of their own still is, and so
    is int8 of a classmate's model."""
    import io

    from tinytorch.benchmarking.digits import load_digits_split
    from tinytorch.benchmarking.optimize import prune_magnitude
    from tito.olympics.report import course_recipes
    from tito.olympics.records import file_tensors, summarize

    base = default_digits_model().eval()
    train = load_digits_split("train")[0]

    def seen(model) -> dict:  # as a measuring sandbox sees a file: the hash of its weights and its signatures
        data = _traced_bytes(model)
        return {"sha256": state_dict_sha256(model_state(torch.jit.load(io.BytesIO(data)))),
                "tensors": summarize(file_tensors(data))}

    own = prune_magnitude(base, 0.45)  # a student's own choice: no course recipe makes it
    models = {"dave": seen(own),"bob": seen(quantize_int8(base, "static", calibration_data=train[:256].split(64))),
              "bob2": seen(quantize_int8(base, "static", calibration_data=train[256:512].split(64))),
              "alice": seen(prune_magnitude(base, 0.5)), "alice2": seen(prune_magnitude(base, 0.5)),
              "erin": seen(quantize_int8(own, "static", calibration_data=train[:256].split(64))),
              "frank": seen(quantize_int8(own, "static", calibration_data=train[512:768].split(64)))}
    assert models["bob"]["sha256"] == models["bob2"]["sha256"], "int8 weights do not depend on the calibration"
    recipes = course_recipes()
    assert {r["sha256"] for r in recipes} >= {models["bob"]["sha256"], models["alice"]["sha256"]}
    reference = {"tensors": summarize(file_tensors(_traced_bytes(base))), "recipes": recipes}
    pairs = similar_models(models, reference=reference)
    assert [p["students"] for p in pairs] == [["dave", "erin"], ["dave", "frank"], ["erin", "frank"]], pairs
    assert "identical weights" in pairs[2]["why"][0]
    # int8 of a classmate's model: its file holds integers, each row its float row over one scale; compared row by
    # row at unit norm it is 0.006 from dave's (read raw, 0.996 from everything: it passed every copy check)
    assert any("hidden units' order" in w for w in pairs[0]["why"]), pairs[0]
    without = similar_models(models, reference={"tensors": reference["tensors"]})  # main's judge: no recipes
    assert ["bob", "bob2"] in [p["students"] for p in without] and ["alice", "alice2"] in [p["students"] for p in without]


def _traced_bytes(model) -> bytes:
    import io

    buf = io.BytesIO()
    with torch.no_grad():
        torch.jit.save(torch.jit.trace(model.eval(), torch.zeros(1, 1, 8, 8), check_trace=False), buf)
    return buf.getvalue()


def test_timed_answers_are_compared_with_the_accuracy_pass_by_the_one_rule():
    from tito.olympics.claims import timed_consistency

    honest = timed_consistency([1750, 6, 5, 39])  # a few noise flips each way
    assert not honest["differs"] and abs(honest["timed"] - honest["pass"]) < 0.01
    cheat = timed_consistency([180, 1570, 0, 50])  # right in the accuracy pass, zeros once timed
    assert cheat["differs"] and cheat["timed"] < 0.15 < 0.9 < cheat["pass"]
    assert not timed_consistency([10, 1, 0, 2])["differs"], "too few calls to tell: the one rule's p-value decides"
    assert timed_consistency(None) is None


def test_the_round_noise_defeats_a_lookup_table_and_keeps_honest_accuracy():
    """Issue 32: rounding a request's images back to the 1/16 grid finds almost none of them in a table of the
    public test split; the course's models keep their accuracy within a point."""
    from tinytorch.benchmarking.digits import load_digits_split
    from tinytorch.benchmarking.optimize import prune_magnitude
    from tito.olympics.inputs import Plan

    X, y = load_digits_split("test")
    Xn = X.numpy()
    table = {np.round(Xn[i] * 16).astype(np.int8).tobytes(): int(y[i]) for i in range(len(y))}
    base = default_digits_model()
    models = {"base": base, "pruned": prune_magnitude(base, 0.5)}
    plan = Plan(len(y), secret=12345, rounds=12)
    with torch.inference_mode():
        clean = {k: float((m(X).argmax(1) == y).float().mean()) for k, m in models.items()}
        for start in (0, 300, 600):
            idx, noisy = plan.stream(Xn, start, 300)
            hits = np.mean([table.get(np.round(noisy[i] * 16).astype(np.int8).tobytes()) == int(y[j])
                            for i, j in enumerate(idx)])
            assert hits < 0.05, f"stream {start}: the table still answers {hits:.0%} after rounding"
            for k, m in models.items():
                acc = float((m(torch.from_numpy(noisy)).argmax(1) == y[idx]).float().mean())
                assert abs(acc - float((m(X[idx]).argmax(1) == y[idx]).float().mean())) < 0.015, (k, start, acc, clean[k])


def test_private_data_is_checked_and_named(tmp_path):
    from tito.olympics.staging import load_private_data

    good = tmp_path / "held_out.npz"
    np.savez(good, images=np.zeros((40, 1, 8, 8), np.float32), labels=np.arange(40) % 10)
    X, y = load_private_data(good)
    assert X.shape == (40, 1, 8, 8) and y.dtype == np.int64
    for name, arrays, match in (("missing", None, "no such file"), ("nolabels", {"images": np.zeros((40, 1, 8, 8))}, "labels"),
                                ("shape", {"images": np.zeros((40, 64)), "labels": np.zeros(40, int)}, r"\(N, 1, 8, 8\)"),
                                ("range", {"images": np.zeros((40, 1, 8, 8)), "labels": np.full(40, 10)}, "0-9"),
                                ("few", {"images": np.zeros((5, 1, 8, 8)), "labels": np.zeros(5, int)}, "at least 30")):
        path = tmp_path / f"{name}.npz"
        if arrays is not None:
            np.savez(path, **arrays)
        with pytest.raises(TitoError, match=match) as e:
            load_private_data(path)
        assert "--data" in str(e.value)
    from tito.olympics.staging import prepare_work

    public = prepare_work(tmp_path / "w1")
    assert public["source"].startswith("the public digits test split (450 images)") and "--data" in public["source"]
    held = prepare_work(tmp_path / "w2", good)
    assert held["X"].shape == (40, 1, 8, 8) and held["source"] == "the instructor's held-out set held_out.npz (40 images)"
    figs = judged_figures({"round_mean_ms": {"baseline": [2.0] * 6, "optimized": [1.0] * 6},
                           "correct": {"baseline": [1, 0], "optimized": [1, 0]},
                           "size_bytes": {"baseline": 100, "optimized": 50}}, EVENT)
    board = judged_leaderboard({"ann": {"figures": figs}}, EVENT, source=public["source"])
    assert "Accuracy was measured on the public digits test split" in board["markdown"]


def test_a_long_pickled_attribute_is_walked_in_linear_time(tmp_path):
    """A fourth red team's class stall: a model with a 300,000-tuple attribute held the judge's own process
    13.6 minutes (its pickle walk searched the whole stack at every tuple). The walk finds marks by position
    now: 300,000 tuples are sized, the model's weight records found by key, well inside a generous bound."""
    import subprocess
    import sys

    path = tmp_path / "padded.pt"
    make = tmp_path / "make_padded.py"  # its own file: TorchScript reads the attribute's annotation from source
    make.write_text(
        "import sys\nfrom typing import List, Tuple\nimport torch\n"
        "from tinytorch.benchmarking.digits import default_digits_model\n\n\n"
        "class Padded(torch.nn.Module):\n"
        "    table: List[Tuple[int, int, int, int]]\n\n"
        "    def __init__(self, inner, n):\n"
        "        super().__init__()\n        self.inner = inner\n"
        "        self.table = [(i, i + 1, i + 2, i + 3) for i in range(n)]\n\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return self.inner(x)\n\n\n"
        "torch.jit.script(Padded(default_digits_model().eval(), 300_000)).save(sys.argv[1])\n")
    made = subprocess.run([sys.executable, str(make), str(path)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert made.returncode == 0, made.stderr[-2000:]
    code = ("import sys; from tinytorch.benchmarking.olympics import model_file_bytes; n, how = model_file_bytes(sys.argv[1]); "
            "print(n, how)")
    # the bound is a hang guard 50x above the linear walk's time here, not a speed test (the quadratic walk: ~170 s quiet)
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    size = int(r.stdout.split()[0])
    weights = sum(t.numel() * t.element_size() for t in default_digits_model().state_dict().values())
    assert size > weights, (size, weights)  # the weights' records were found by key and counted


def test_the_judge_takes_student_ids_by_grading_s_rule(tmp_path):
    """One student-id rule for grading and the judge (tito.isolation.untrusted): a folder whose name is no id, and
    two folders equal but for case, are each a rejected line of their own (the judge used to rename the first with
    a hash, which grading refused); a plain name is judged under its own name."""
    from tito.olympics.staging import student_folders

    for name in ("ann lee", "Bob", "bob", "cy"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "submission.json").write_text(json.dumps({"models": {}}))
        (tmp_path / name / "model.pt").write_bytes(b"x")
    valid, rejected = student_folders(tmp_path)
    assert [st.name for st in valid] == ["cy"]
    assert "as a student id" in rejected["ann lee"]
    assert all("the same student id as" in rejected[n] for n in ("Bob", "bob"))


def test_each_event_s_judged_score_is_its_registry_row():
    "Every event's judged score against a hand-computed figure (not the registry's formula), and which events count speed."
    from tinytorch.benchmarking.olympics import EVENT_RULES, OlympicEvent

    base, opt = [4.0, 6.0, 3.0, 8.0, 5.0], [2.0, 2.0, 2.0, 2.0, 2.5]  # per-round speed-ups 2, 3, 1.5, 4, 2: median 2
    record = {"round_mean_ms": {"baseline": base, "optimized": opt},
              "correct": {"baseline": [1, 1, 1, 1], "optimized": [1, 1, 1, 0]}, "size_bytes": {"baseline": 800, "optimized": 100}}
    rounds = [b / o for b, o in zip(base, opt)]
    expected = {"latency_sprint": 2.0, "memory_challenge": 8.0, "accuracy_contest": 0.75,
                "extreme_push": 16.0,  # the median of speed-up x 8 per round
                "all_around": sorted((s * 8 * 0.75) ** (1 / 3) for s in rounds)[2]}
    for event, value in expected.items():
        score = judged_figures(record, event)["score"]
        assert score["value"] == pytest.approx(value, rel=1e-12), (event, score)
        assert score["rule"] == EVENT_RULES[OlympicEvent(event)].score
    assert {e.value for e, r in EVENT_RULES.items() if r.counts_speed} == {"latency_sprint", "all_around", "extreme_push"}
