"""`tito olympics judge` on .onnx submissions (issue 35): an honest file is run by ONNX Runtime in its measuring
sandbox, timed in the same rounds against the same course baseline and sized by its bytes; each hostile or wrong
file (tests/fixtures/olympics_onnx.py) is its own author's line under "Rejected", with the reason."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.olympics_onnx import EVENT, make_onnx_class

from tito.isolation import sandbox


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    from tito.cli import main

    if sandbox.find() is None:
        pytest.skip("the judge needs bubblewrap (apt-get install bubblewrap)")
    root = tmp_path_factory.mktemp("olympics_onnx")
    expected = make_onnx_class(root / "submissions")
    code = main(["olympics", "judge", str(root / "submissions"), "--event", EVENT, "--output-dir", str(root / "out"),
                 "--rounds", "6", "--timeout", "60"])
    out = root / "out"
    return {"code": code, "expected": expected, "out": out, "submissions": root / "submissions",
            "students": {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")},
            "rejected": json.loads((out / "rejected.json").read_text())}


def test_an_honest_onnx_file_is_judged_like_torchscript(judged):
    assert judged["code"] == 0
    rec = judged["students"]["onnxok"]
    assert rec["static"]["kinds"] == {"optimized": "ONNX, run by ONNX Runtime (one thread)", "baseline": "TorchScript"}
    # its size is its file's bytes; the denominator is the course baseline the judge measured
    assert rec["static"]["size_bytes"]["optimized"] == (judged["submissions"] / "onnxok" / "model.onnx").stat().st_size
    assert "external data is refused" in rec["static"]["size_method"]["optimized"]
    # the same rounds as every model, each a ratio within its round; the timed answers are the judged ones
    assert rec["timing"]["rounds"] == 6 and len(rec["measurements"]["round_mean_ms"]["optimized"]) == 6
    assert rec["figures"]["accuracy"]["timed"]["calls"] > 0 and not rec["figures"]["accuracy"]["timed"]["differs"]
    # the weights the submission was made from are the ones the sandbox read (one hash in submit and judge)
    assert {c["claim"]: c["contradicted"] for c in rec["claims"]}["optimized weights sha256"] is False
    assert rec["flags"] == [], rec["flags"]
    assert rec["rank"] == 1


def test_each_hostile_onnx_file_costs_only_its_author(judged):
    r = judged["rejected"]
    for name, phrase in judged["expected"].items():
        if phrase == "ranked":
            continue
        assert name in r and phrase in r[name], (name, r.get(name))
        assert "optimized model (ONNX)" in r[name]
    assert set(judged["students"]) == {"onnxok"}
    board = (judged["out"] / "leaderboard.md").read_text()
    assert all(f"- {name}:" in board for name in r)


def _outside(t):
    "Point tensor `t`'s data at a file outside the submission (external data), as a hostile model would."
    from onnx import TensorProto

    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.ClearField("int64_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "../../../../etc/passwd"), ("offset", "0"), ("length", "16")):
        t.external_data.add(key=k, value=v)


def test_external_data_is_refused_in_sparse_tensors_too(monkeypatch):
    """Every place a tensor can sit is checked before onnx.checker (which would follow the path): a Constant's
    sparse_value and a sparse initializer's indices as well as its values (a red-team lead: only dense
    tensors and sparse values were checked)."""
    import numpy as np
    from fixtures.olympics_onnx import _linear_model
    from onnx import helper, numpy_helper

    import tito.isolation

    import tito.olympics

    monkeypatch.syspath_prepend(str(Path(tito.isolation.__file__).parent))  # server.py imports protocol staged beside it
    monkeypatch.syspath_prepend(str(Path(tito.olympics.__file__).parent))  # ... and records
    from tito.olympics.server import CheckFailed, check_onnx

    def sparse(name):
        return helper.make_sparse_tensor(numpy_helper.from_array(np.ones(2, np.float32), name + "_v"),
                                         numpy_helper.from_array(np.array([0, 3], np.int64), name + "_i"), [64])

    check_onnx(_linear_model(["batch", 1, 8, 8]), [1, 8, 8], 10)  # the honest graph passes
    by_attribute = _linear_model(["batch", 1, 8, 8])
    s = sparse("c")
    _outside(s.values)
    by_attribute.graph.node.insert(0, helper.make_node("Constant", [], ["unused"], sparse_value=s))
    by_indices = _linear_model(["batch", 1, 8, 8])
    s = sparse("init")
    _outside(s.indices)
    by_indices.graph.sparse_initializer.append(s)
    for model in (by_attribute, by_indices):
        with pytest.raises(CheckFailed, match="external data"):
            check_onnx(model, [1, 8, 8], 10)
