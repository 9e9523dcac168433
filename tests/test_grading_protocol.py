"""The judge/host boundary in one process: what crosses is data, and nothing the student's code does
can make the judge run it.

A `Host` (the student's side) serves in a thread over a socket pair; a `Session` (the judge's side)
calls it. The student's "module" is ordinary code run in the host's namespace, written here the way a
cheating student would write it: always-equal values, a class that claims to be `int`, a pickle
that runs code when loaded, frame peeking. Each test shows the judge sees only data.
"""
import ast
import base64
import json
import math
import pickle
import socket
import threading
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from tito.isolation import protocol
from tito.grading.host import Host
from tito.isolation.protocol import ProtocolError, decode, encode
from tito.grading.remote import Remote, Session

ROOT = Path(__file__).resolve().parent.parent

STUDENT = '''
import math, sys

class Eq(float):                        # a float whose comparisons all say yes, claiming to be an int
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return True
    def __gt__(self, other): return True
    __hash__ = float.__hash__
    @property
    def __class__(self): return int

class Liar:                              # an object equal to everything, claiming to be an int
    def __eq__(self, other): return True
    @property
    def __class__(self): return int
    def __repr__(self): return "1"

class Point:
    def __init__(self, x, y): self.x, self.y = x, y
    def norm(self): return math.hypot(self.x, self.y)

class BadInput(ValueError):
    pass

def mean(xs): return Eq(0.0)
def liar(): return Liar()
def point(x, y): return Point(x, y)
def check(x):
    if x < 0:
        raise BadInput(f"x: expected a non-negative number, got {x}")
    return x
def peek():                              # looks for the test's expected value in the caller's frames
    f, found = sys._getframe(), []
    while f is not None:
        found += [v for k, v in f.f_locals.items() if k in ("expected", "want")]
        f = f.f_back
    return found[0] if found else None
def call_twice(fn, x): return [fn(x), fn(x + 1)]
def arrays(): return {"a": __import__("numpy").arange(6).reshape(2, 3), "t": __import__("torch").ones(2, dtype=__import__("torch").bfloat16)}
class Spoof:                             # claims to be a built-in float through a path of module attributes
    pass
Spoof.__module__, Spoof.__qualname__ = "__main__", "builtins.float"

import dataclasses as _dc
@_dc.dataclass
class Notebook:                          # claims to be a dataclass of the judge's own
    name: str = "x"
Notebook.__module__ = "tito.grading.autograder"

class TestTimeout(Exception):            # claims the judge's own time-limit exception
    __module__ = "tito.grading.autograder"

def spoof(): return Spoof()
def fake_notebook(): return Notebook()
def raise_timeout(): raise TestTimeout("time is up")
def raise_cancelled():
    import asyncio
    raise asyncio.CancelledError("cancelled")
def snoop(fn):                           # reads what a test's function carries instead of calling it
    found = []
    for where in ("__self__", "__closure__", "__defaults__", "__kwdefaults__", "__dict__"):
        v = getattr(fn, where, None)
        found.append(repr(vars(v) if where == "__self__" and hasattr(v, "__dict__") else v))
    found.append(repr(sorted(getattr(fn, "__globals__", {}))))
    return " ".join(found)
def apply(fn, *args): return fn(*args)
KEPT = []
def keep(fn): KEPT.append(fn)            # holds on to a test's function past its test
def call_kept(): return KEPT[-1]()
class Swallow:                           # a context manager that hides every exception and keeps its text
    seen = []
    def __enter__(self): return self
    def __exit__(self, et, ev, tb):
        Swallow.seen.append(repr(ev))
        return True
def swallowed(): return list(Swallow.seen)
def evil_pickle():                       # a value whose unpickling would run code
    class Boom:
        def __reduce__(self): return (open, ("/tmp/tito-pwned", "w"))
    return __import__("pickle").dumps(Boom())
'''


@pytest.fixture()
def session():
    judge_end, host_end = socket.socketpair()
    host = Host(host_end)
    thread = threading.Thread(target=host.endpoint.serve_forever, daemon=True)
    thread.start()
    s = Session(judge_end, graded={"student"})
    assert s.request("setup", cells=[{"kind": "student", "source": STUDENT}]) == []
    yield s
    judge_end.close()
    thread.join(5)
    host_end.close()


def name(s, n):
    return s.request("name", name=n)


def test_an_always_equal_float_arrives_as_its_value(session):
    got = name(session, "mean")([1, 2, 3])
    assert type(got) is float and got == 0.0 and got != 2


def test_an_object_equal_to_everything_is_not_equal_to_a_value_and_is_no_int(session):
    got = name(session, "liar")()
    assert isinstance(got, Remote) and not isinstance(got, int)
    assert got != 1 and not (got == 1) and repr(got) == "1"


def test_a_class_that_claims_a_judge_class_is_not_one(session):
    """The red team's spoofs: a class naming a built-in through a path of module attributes, a dataclass
    naming one of the judge's own, exceptions naming the judge's time limit or a BaseException."""
    import tito.grading.autograder as judge

    assert not isinstance(name(session, "spoof")(), float)
    fake = name(session, "fake_notebook")()
    assert isinstance(fake, Remote) and not isinstance(fake, judge.Notebook)  # a proxy, not rebuilt
    for fn in ("raise_timeout", "raise_cancelled"):
        with pytest.raises(Exception) as err:  # an Exception: never the judge's TestTimeout or a BaseException
            name(session, fn)()
        assert not isinstance(err.value, judge.TestTimeout), fn


def test_proxies_compare_by_their_data_and_keep_their_identity(session):
    point = name(session, "point")
    a, b, c = point(3, 4), point(3, 4), point(1, 1)
    assert a == b and a != c and a.norm() == 5.0 and type(a).__name__ == "Point"
    assert isinstance(a, name(session, "Point")) and type(a) is type(c)


def test_exceptions_arrive_as_builtin_types_with_the_message(session):
    with pytest.raises(ValueError, match="x: expected a non-negative") as err:
        name(session, "check")(-1)
    assert type(err.value).__name__ == "BadInput" and err.value.__tito_host__["type"] == "BadInput"
    with pytest.raises(name(session, "BadInput")):  # the student's exception class can be caught by name
        name(session, "check")(-2)


def test_frames_of_the_judge_are_out_of_reach(session):
    expected = 42  # noqa: F841 - what a frame-peeking student would look for
    assert name(session, "peek")() is None


def test_judge_functions_are_called_back_and_see_the_judge_state(session):
    seen = []

    def spy(v):
        seen.append(v)
        return v * 10

    assert name(session, "call_twice")(spy, 4) == [40, 50] and seen == [4, 5]


def test_arrays_and_tensors_arrive_as_data(session):
    got = name(session, "arrays")()
    assert isinstance(got["a"], np.ndarray) and got["a"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert got["t"].dtype == torch.bfloat16 and got["t"].tolist() == [1.0, 1.0]


def test_bytes_of_a_pickle_stay_bytes(session, tmp_path):
    data = name(session, "evil_pickle")()
    assert type(data) is bytes and not Path("/tmp/tito-pwned").exists()


def test_the_judge_refuses_a_pickled_reply_and_runs_nothing(tmp_path):
    """A host that answers with a pickle (here one that would create a file when loaded) gets a
    ProtocolError; nothing is unpickled."""
    marker = tmp_path / "pwned"

    class Boom:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    judge_end, host_end = socket.socketpair()
    s = Session(judge_end, graded=set())

    def evil_host():
        req = protocol.recv(host_end)
        protocol.send(host_end, {"re": req["id"], "ok": {"$pk": base64.b64encode(pickle.dumps(Boom())).decode()}})

    t = threading.Thread(target=evil_host)
    t.start()
    with pytest.raises(ProtocolError, match="refused"):
        s.request("name", name="anything")
    t.join(5)
    assert not marker.exists()
    assert s.endpoint.broken  # the channel is not trusted again


def test_a_reply_over_the_judges_cap_fails_its_call_unread():
    """Red team 49: one 184 MB value returned to the judge took its memory (outside the student's cgroup) from
    386 MB to 1.1 GB. A reply over MAX_HOST_FRAME fails that call with TooLarge, unread (the judge reads the
    length only), and the channel is not used again; one just under it arrives (an honest Module 19 grading's
    largest message is far below). The test's message names the size and the limit."""
    judge_end, host_end = socket.socketpair()
    judge_end.settimeout(60)  # a host thread that failed: no hang
    s = Session(judge_end, graded=set())
    sizes = [protocol.MAX_HOST_FRAME - 100, protocol.MAX_HOST_FRAME + 1]

    def big_host():
        for n in sizes:
            req = protocol.recv(host_end)
            pad = n - len(json.dumps({"re": req["id"], "ok": ""}, separators=(",", ":")))
            body = json.dumps({"re": req["id"], "ok": "x" * pad}, separators=(",", ":")).encode()
            try:
                host_end.sendall(protocol._HEAD.pack(n) + body)
            except OSError:   # the judge closed its end without reading
                return

    t = threading.Thread(target=big_host)
    t.start()
    assert len(s.request("name", name="small")) == sizes[0] - len('{"re":1,"ok":""}')
    with pytest.raises(protocol.TooLarge, match=f"{sizes[1]:,} bytes, over the limit of {protocol.MAX_HOST_FRAME:,}"):
        s.request("name", name="big")
    assert s.endpoint.broken
    judge_end.close()
    t.join(10)
    assert not t.is_alive()
    from tito.grading.autograder import NotebookTests
    msg = NotebookTests.describe(types.SimpleNamespace(session=None), protocol.TooLarge("a message of 9 bytes"), {})
    assert msg.startswith("your code's process sent a message of 9 bytes") and "not read" in msg


@pytest.mark.parametrize("value, why", [
    ({"$pk": "gASVAAAAAAAAAAB9lC4="}, "refused"),
    ({"$np": {"dtype": "object", "shape": [1], "data": ""}}, "not allowed"),
    ({"$np": {"dtype": "float64", "shape": [3], "data": base64.b64encode(b"\0" * 8).decode()}}, "do not make"),
    ({"$zz": 1}, "unknown tag"),
    ({"a": 1, "b": 2}, "expected a value"),
    ({"$f": "1e999"}, "nan, inf"),
    ({"$dt": "__import__"}, "unknown torch dtype"),
])
def test_malformed_or_unsafe_values_are_refused(value, why):
    s = Session(socket.socketpair()[0], graded=set())
    with pytest.raises(ProtocolError, match=why):
        s.decode(value)


def test_deep_nesting_and_huge_frames_are_refused():
    deep: object = 1
    for _ in range(protocol.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(ProtocolError, match="deeper"):
        decode(deep, None)
    a, b = socket.socketpair()
    a.sendall(protocol._HEAD.pack(protocol.MAX_FRAME + 1))
    with pytest.raises(ProtocolError, match="limit"):
        protocol.recv(b)


def test_values_round_trip():
    value = {"t": (1, 2.5, float("nan"), None, "s"), 3: [True, b"x", {1, 2}], "arr": np.float32(0.5),
             "q": torch.quantize_per_tensor(torch.tensor([0.5, -1.0]), 0.1, 0, torch.qint8), "p": Path("a/b")}
    got = decode(encode(value, None), None)
    assert got["t"][:2] == (1, 2.5) and got["t"][3:] == (None, "s") and got[3] == [True, b"x", {1, 2}]
    assert type(got["arr"]) is np.float32 and got["p"] == Path("a/b")
    assert torch.equal(got["q"].int_repr(), value["q"].int_repr()) and got["q"].q_scale() == 0.1


def test_no_judge_side_module_can_unpickle():
    """The modules that run in the judge or in tito hold no call that loads a pickle (the host, which
    runs in the sandbox, is the only place that unpickles: what the judge sends it)."""
    judge_side = [p for p in (ROOT / "tito" / "grading").glob("*.py") if p.name != "host.py"]
    for path in judge_side + sorted((ROOT / "tito" / "isolation").glob("*.py")):  # the plumbing both sides share
        rel = path.relative_to(ROOT / "tito").as_posix()
        tree = ast.parse(path.read_text())
        loads = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in ("load", "loads")
                 and isinstance(n.value, ast.Name) and n.value.id in ("pickle", "cloudpickle", "dill", "torch")]
        unpicklers = [n for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute))
                      and getattr(n, "id", getattr(n, "attr", "")) == "Unpickler"]
        assert not loads and not unpicklers, f"{rel} unpickles"


def test_a_dead_renderer_process_does_not_cost_the_feedback_page(tmp_path):
    """The judge renders pages in a process of its own; when that process dies (seen once under a loaded full
    test run: a student's feedback page was missing), the page is rendered in the judge instead."""
    import io
    from concurrent.futures.process import BrokenProcessPool

    import nbformat

    from tito.grading.autograder import Judge, Notebook
    from tito.isolation.protocol import read_frames

    class DeadPool:
        def submit(self, *a, **k):
            raise BrokenProcessPool("A child process terminated abruptly")

    nb_json = nbformat.v4.new_notebook()
    nb_json.cells = [nbformat.v4.new_code_cell("x = 1", id="c0")]
    nb_json = json_roundtrip(nb_json)
    judge = Judge.__new__(Judge)
    judge.root, judge.lock, judge.timing, judge.renderer, judge.out = tmp_path, threading.Lock(), {}, DeadPool(), io.BytesIO()
    nb = Notebook("stats_dev", {}, [], [], tmp_path, tmp_path, None, None, 1, nb_json, nb_json, {})
    judge.report(nb, {"notebook": "stats_dev", "tests": {}}, {"cells": {}, "stopped": ""})
    assert (tmp_path / "out" / "feedback" / "stats_dev.html").is_file(), "the page was lost with its renderer"
    assert judge.timing["render_fallbacks"] == 1
    judge.out.seek(0)
    (frame,) = read_frames(judge.out)
    assert frame["notebook"] == "stats_dev" and frame["cell_errors"] == [], frame


def json_roundtrip(nb):
    import json
    return json.loads(json.dumps(nb))


# ---- nothing the judge knows crosses ------------------------------------------------------------

class _FakeCounter:  # a test's fake: its state (what the test expects) must stay in the judge
    def __init__(self):
        self.idle_w, self.expected_uj, self.calls = 7.25, 8181, 0

    def work(self):
        self.calls += 1

    def read(self):
        return 1000 + self.calls * self.expected_uj


def test_a_fake_reaches_the_student_as_a_handle_only(session):
    """The student's function gets the fake's methods as callbacks: calling them works (the state stays
    here and counts), and nothing of the fake (its object, closure, defaults, globals) is readable there."""
    fake, secret = _FakeCounter(), 8181
    apply = name(session, "apply")
    assert apply(fake.read) == 1000 and apply(fake.work) is None and fake.calls == 1
    for fn in (fake.read, fake.work, lambda: secret, lambda x=secret: x):
        seen = name(session, "snoop")(fn)
        assert "8181" not in seen and "7.25" not in seen and "expected_uj" not in seen, seen


def test_a_tests_callbacks_end_with_it(session):
    """A function a test handed the student's code answers while that test runs; once the judge
    revokes that test's callbacks (NotebookTests.run_test, as each test ends), calling it is refused
    with a clear error; the same function handed over by a later test works again."""
    fake = _FakeCounter()
    mark = session.callback_mark()
    name(session, "keep")(fake.read)
    assert name(session, "call_kept")() == 1000
    session.revoke(mark)
    with pytest.raises(RuntimeError, match="belongs to a test that has ended"):
        name(session, "call_kept")()
    assert not session.endpoint.broken  # refused as an error of the call, the channel stays up
    fake.work()
    mark = session.callback_mark()
    name(session, "keep")(fake.read)  # a later test hands the same method over: a new handle
    assert name(session, "call_kept")() == 1000 + 8181
    session.revoke(mark)
    with pytest.raises(RuntimeError, match="can no longer be called"):
        name(session, "call_kept")()


def test_the_judge_refuses_to_send_code_or_objects_that_carry_data(session):
    from tito.isolation.protocol import NAMESPACE
    from tito.grading.remote import NotSendable

    secret, fake, proxy_fn = 81, _FakeCounter(), name(session, "mean")
    refused = {"a closure over a value": lambda: secret,
               "a default holding a value": lambda n=secret: n,
               "a keyword default holding a value": lambda *, n=secret: n,
               "a method of a fake": fake.read,
               "a builtin bound to the test's list": [secret].count,
               "a class of the test code": type("Fake", (), {"__module__": NAMESPACE, "expected": secret}),
               "an object of the test code": type("Fake", (), {"__module__": NAMESPACE})()}
    for why, obj in refused.items():
        with pytest.raises(NotSendable):
            session.pickle(obj, run=True)
        assert why  # each case is refused for what it is
    data = {"answers": [secret]}
    glob = types.FunctionType(compile("lambda: answers", "<test>", "eval").co_consts[0], data)  # reads a test global
    with pytest.raises(NotSendable, match="global answers"):
        session.pickle(glob, run=True)
    # functions of a test class sent as the student's input: their captured data is refused too
    model = type("Model", (), {"__module__": NAMESPACE, "forward": lambda self, x, k=secret: x * k})()
    with pytest.raises(NotSendable, match="default"):
        name(session, "apply")(lambda m: m, model)  # the lambda is a callback; the model is pickled
    # a callback that hands back the fake itself (not a reading): refused, the test fails saying why
    class Chain(_FakeCounter):
        __module__ = NAMESPACE

        def me(self):
            return self

    with pytest.raises(Exception, match="readable"):
        name(session, "apply")(Chain().me)
    # allowed: code that holds only handles, modules and builtins of a module
    for ok in (lambda m: proxy_fn(m), math.sqrt, torch.get_num_threads, lambda x: np.sum(x)):
        session.pickle(ok, run=True)
    session.pickle(torch.nn.Linear(2, 2))  # a model is the student's input: its weights may cross


def test_a_student_context_manager_cannot_swallow_or_read_a_failed_assert(session):
    with pytest.raises(AssertionError, match="expected 81"):
        with name(session, "Swallow")():
            assert False, "expected 81"
    assert "81" not in " ".join(name(session, "swallowed")())


# ---- hidden tests reveal nothing reusable -------------------------------------------------------

def _verdict(src: str, student_error: BaseException | None = None) -> str:
    """The judge's message for the failure of a test cell `src` (its hidden region as the plan marks it)."""
    from tito.grading import plan
    from tito.grading.autograder import NotebookTests

    cell = {"grade_id": "g", "source": src, "hidden": plan.hidden_ranges(src)}
    t = object.__new__(NotebookTests)
    t.session = t.pid = t.property = None

    def student(*args):  # the student's code, raising from the host
        raise student_error

    ns = {"hidden_property": t._hidden_property, "student": student}
    try:
        exec(compile(src, "<test g>", "exec"), ns)  # noqa: S102
    except Exception as e:  # noqa: BLE001
        return t.describe(e, cell)
    raise AssertionError("the test cell passed")


def test_a_failed_hidden_case_names_its_property_never_its_inputs_or_expected_value():
    visible = "n = 80\nassert n == 81, f'images_to_decide(0.78, 0.85, confidence=0.9): expected n = 81, got {n}'\n"
    assert _verdict(visible) == "images_to_decide(0.78, 0.85, confidence=0.9): expected n = 81, got 80"
    hidden = ("assert True\n### BEGIN HIDDEN TESTS\n"
              "hidden_property('the fewest images that decide other accuracies', like='images_to_decide(0.7, 0.8)')\n"
              "target, acc, n = 0.78, 0.85, 80\n"
              "assert n == 81, f'images_to_decide({target}, {acc}, confidence=0.9): expected n = 81, got {n}'\n"
              "### END HIDDEN TESTS\n")
    msg = _verdict(hidden)
    assert msg.startswith("a hidden case failed: the fewest images that decide other accuracies; the visible test "
                          "shows the same mistake: images_to_decide(0.7, 0.8)"), msg
    assert not any(secret in msg for secret in ("81", "0.78", "0.85", "80", "target")), msg
    # no property declared: only that a hidden case failed
    bare = _verdict("### BEGIN HIDDEN TESTS\nassert 2 + 2 == 5, 'expected 5'\n### END HIDDEN TESTS\n")
    assert bare.startswith("a hidden case failed (") and "5" not in bare, bare
    # the student's own exception in a hidden case: its built-in kind only, never its message or class name
    # (a student could carry the case's inputs out in either)
    leak = type("Inputs_0_78_0_85", (ValueError,), {})("inputs were 0.78 and 0.85")
    leak.__tito_host__ = {"type": "Inputs_0_78_0_85", "module": "student", "traceback": "ValueError: 0.78 0.85"}
    msg = _verdict("### BEGIN HIDDEN TESTS\nhidden_property('other accuracies')\nstudent(0.78)\n### END HIDDEN TESTS\n",
                   leak)
    assert msg.startswith("a hidden case failed: other accuracies -- your code raised ValueError"), msg
    assert "0.78" not in msg and "Inputs" not in msg, msg
    stub = NotImplementedError("not yet implemented: images_to_decide")
    stub.__tito_host__ = {"type": "NotImplementedError", "module": "builtins", "traceback": ""}
    assert _verdict("### BEGIN HIDDEN TESTS\nstudent(0.78)\n### END HIDDEN TESTS\n", stub) == \
        "not yet implemented: images_to_decide"
    fake_stub = NotImplementedError("not yet implemented: 0.78 0.85")
    fake_stub.__tito_host__ = stub.__tito_host__
    assert "0.78" not in _verdict("### BEGIN HIDDEN TESTS\nstudent(0.78)\n### END HIDDEN TESTS\n", fake_stub)
