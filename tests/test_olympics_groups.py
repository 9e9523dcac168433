"""`tito olympics judge` in groups (issue 35): a class larger than the memory budget allows at once is judged in
groups, each group's sandboxes started, timed in rounds of their own against the course baseline and closed before
the next; copies are still found across groups, and every student gets every round."""
from __future__ import annotations

import json
import shutil

import pytest
from fixtures.olympics_onnx import EVENT, make_onnx_class

from tito.isolation import sandbox


def test_group_size_fits_the_budget_beside_the_judge():
    from tito.olympics.groups import MARGIN, group_size

    assert group_size(16384, 300, 260, 2) == int((16384 - 300 - 2 * 260 * MARGIN) // (260 * MARGIN))
    assert group_size(16384, 300, 260, 2) * 260 * MARGIN + 300 + 2 * 260 * MARGIN <= 16384
    assert group_size(100, 300, 260, 1) == 1  # never none: one sandbox at a time is the least a run can do


def test_a_class_over_the_budget_is_judged_in_groups(tmp_path, capsys):
    """Also the judge's --resume (the one test of it: a class of one group resumes by the same code): kept rounds
    and measurements are kept, the run's secret seed too; a changed class starts over."""
    from tito.olympics.judge import judge_class

    if sandbox.find() is None:
        pytest.skip("the judge needs bubblewrap (apt-get install bubblewrap)")
    src = tmp_path / "src"
    make_onnx_class(src)
    subs = tmp_path / "subs"
    for name in ("ann", "ben", "cat"):  # three students with the same .onnx file: copies, in different groups
        shutil.copytree(src / "onnxok", subs / name)
    shutil.copytree(src / "wrongoutput", subs / "dan")
    # 900 MiB: one measuring sandbox (a few hundred MiB of PSS) beside the judge at a time
    res = judge_class(subs, EVENT, tmp_path / "out", rounds=6, memory_mb=900, timeouts={"load": 60, "predict": 60, "time": 60})
    state = json.loads((tmp_path / "out" / ".judge-state.json").read_text())
    assert len(state["groups"]) >= 3 and all(len(g) == 1 for g in state["groups"]), state["groups"]
    assert state["memory"]["sandbox_mb"] > 50 and state["memory"]["judge_mb"] > 50
    for r in state["rounds"]:  # a round holds one group's students: a speed-up is a ratio within a round
        assert len(r) == 1
    assert set(res["board"]["ranks"]) == {"ann", "ben", "cat"} and "its output" in res["rejected"]["dan"]
    for name in ("ann", "ben", "cat"):
        rec = res["students"][name]
        assert rec["timing"]["rounds"] == 6
        others = {"ann", "ben", "cat"} - {name}
        assert any(all(o in f for o in others) for f in rec["flags"] if f.startswith("same model as")), rec["flags"]
    # interrupted in the second group, after 3 of its rounds: --resume keeps the groups and every kept round,
    # skips the finished group and measures the rest (the second group's missing rounds, then the third)
    groups = state["groups"]
    second = next(i for i, r in enumerate(state["rounds"]) if set(r) == set(groups[1]))
    kept = state["rounds"][:second + 3]
    (tmp_path / "out" / ".judge-state.json").write_text(json.dumps({**state, "rounds": kept}))
    again = judge_class(subs, EVENT, tmp_path / "out", rounds=6, memory_mb=900, resume=True,
                        timeouts={"load": 60, "predict": 60, "time": 60})
    after = json.loads((tmp_path / "out" / ".judge-state.json").read_text())
    assert after["groups"] == groups and after["rounds"][:second + 3] == kept
    for g in groups:
        assert sum(1 for r in after["rounds"] if set(r) & set(g)) == (6 if set(g) - {"dan"} else 0)
    # every draw comes from a seed drawn secretly for the run (no student can compute a round's images or order
    # ahead), kept for --resume so that the resumed rounds' images are the run's own
    assert after["secret"] == state["secret"] and state["secret"] not in (0, None)
    assert after["static"] == state["static"], "finished measurements are not taken again"
    assert set(again["board"]["ranks"]) == {"ann", "ben", "cat"} and again["rejected"] == res["rejected"]
    # another class (here one whose only student has no model file: no sandbox needed), the same output folder:
    # the saved run is not this one's, so it starts over (a new seed, none of the kept rounds)
    other = tmp_path / "other"
    (other / "eve").mkdir(parents=True)
    (other / "eve" / "submission.json").write_text(json.dumps({"models": {}}))
    capsys.readouterr()
    judge_class(other, EVENT, tmp_path / "out", rounds=6, memory_mb=900, resume=True)
    assert "judging from the start" in capsys.readouterr().err
    changed = json.loads((tmp_path / "out" / ".judge-state.json").read_text())
    assert changed["rounds"] == [] and changed["secret"] != state["secret"], "a new run draws a new seed"
