"""The model server: runs INSIDE one student's sandbox (`python -s -P server.py ROLE=FD ...` or `server.py --trace FD`).

Two modes, so that no Python code of a student's file ever runs in the process that is measured:

- measuring (default): one process per model, each forked from the server once its imports are done and before
  any model file arrives (`ROLE=FD`: the course baseline, the student's model, their own baseline): a model
  shares its process with no other model's bytes, so it can neither read another model's weights (freed heap
  included) nor disturb its calls. A process loads only TorchScript and ONNX (loading and calling either runs no
  Python code): an .onnx file runs in ONNX Runtime on one thread (`OnnxModel`, after `check_onnx`), every other
  model as TorchScript. A file that is neither is reported back as `needs_code`.
- converting (`--trace`): a separate sandbox that loads a state dict (weights only, into the course's
  DigitsCNN) or unpickles a module (its code runs here, and only here), traces it into TorchScript
  on one test image and sends the archive back as bytes; the judge gives the archive (its counted records only) to
  a measuring server. What a pickled module's Python code does at call time (skip work when timed, look answers
  up, patch this server) is not in its trace.

Requests and answers over a process's stream socket, one frame each (tito.isolation.protocol, data only); a request
with "nbytes" is followed by that many raw bytes, read straight into memory this server allocated for them:

    {"op": "ready", "cpu": n or null}        -> {"ok": true}   (imports done; every thread moves to core n)
    {"op": "file", "role": r, "nbytes": n} + n bytes -> {"ok": true}   (the next part of a model file: the measuring
                                                  sandbox has no model file, and receives only the records its size counts)
    {"op": "load", "models": {role: file name}, "sample": [1, 8, 8], "classes": 10}
        -> {"ok": true, "kinds": {role: how}, "needs_code": [role, ...], "tensors": {role: summaries}}
           (the bytes sent, loaded; `tensors`: bounded signatures of every tensor the bytes hold, taken before the
           model is loaded: `records.summarize`; a TorchScript model that calls a clock or file I/O is refused:
           `refused_ops`)
    {"op": "stage", "count": k, "nbytes": k * image bytes} + the images as float32
                                             -> {"ok": true}   (k tensors, each newly allocated and filled from the
                                                  socket: the next request's inputs, one per call, never a view of another)
    {"op": "predict", "role": r}             -> {"ok": true, "outputs": array (k, classes)}  (one call per staged tensor)
    {"op": "time", "role": r}                -> {"ok": true}   (one call per staged tensor: the judge times the
                                                  request from outside; each call's output is copied as soon as its
                                                  call's clock stops, so what the judge reads is what it returned)
    {"op": "outputs"}                        -> {"ok": true, "outputs": array (calls, classes), "call_ns": array (calls,)}
                                                 (of the last timed request; each call's own time, read here around
                                                 it: the no-caching audit compares calls, the ranks use the judge's clock)
    {"op": "hash", "role": r}                -> {"ok": true, "sha256": hash of its weights (`model_state`)}
    {"op": "trace", "path": p}  (--trace)    -> {"ok": true, "torchscript": bytes, "sha256": hash of its weights}
    {"op": "bye"}

A failure is {"ok": false, "error": "Type: message"}; the judge decides what it means. A model's printed output is
capped (OUTPUT_CHARS): past it, its call fails saying how much it wrote.
"""
from __future__ import annotations

import io
import os
import re
import socket
import sys
import time
import warnings
import zipfile

import numpy as np
import torch

from protocol import encode, recv, send  # staged beside this file (tito.isolation.protocol)
from records import file_tensors, summarize  # staged beside this file (tito.olympics.records)
from tinytorch.benchmarking.olympics import state_dict_sha256  # imported before "ready": a student's time starts after
from tinytorch.benchmarking.results import model_state

OUTPUT_CHARS = 100_000  # what a model may print in all (its output goes to a log no one reads)


def load_code_free(data: bytes) -> tuple[torch.nn.Module, str] | None:
    """A TorchScript model from a file's bytes (loading it runs no Python code); None for anything else: the
    converting sandbox turns a state dict or a pickled module into TorchScript first."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.jit.load(io.BytesIO(data), map_location="cpu").eval(), "TorchScript"
    except Exception:  # not a TorchScript archive
        return None


# TorchScript operators a measured model may not call, each with why: a clock is a way round the judge's timing (it
# tells a model where a request ends, to defer its calls' work to the last one), files reach past the counted
# bytes. An honest model (a traced or scripted network) calls none of them. (A task forked onto another thread is
# caught by what it costs: CPU outside the model's own requests.)
REFUSED_OPS = {
    "prim::TimePoint": "reads a clock (torch.ops.prim.TimePoint): a model could tell where a timed request ends "
                       "and defer its calls' work to the last one",
    "aten::save": "writes a file (torch.save)",
    "aten::from_file": "reads a file (torch.from_file)",
}
# the same operators as they are written in an archive's TorchScript code (every op a model calls is there by
# name): a net under the graph walk, for code the walk does not reach (a method called through an interface)
REFUSED_CODE = re.compile(r"\bops\.prim\.TimePoint\b|\btorch\.(?:save|from_file)\s*\(")


def _graph_kinds(graph, kinds: set[str]) -> None:
    "Every node kind in `graph`, its blocks (If, Loop) and forked subgraphs, into `kinds`."
    for node in graph.nodes():
        kinds.add(node.kind())
        for block in node.blocks():
            _graph_kinds(block, kinds)
        if node.kind() == "prim::fork" and "Subgraph" in node.attributeNames():
            _graph_kinds(node.g("Subgraph"), kinds)


def refused_ops(model: torch.nn.Module, data: bytes = b"") -> str | None:
    """Why a TorchScript model is not run, or None: the first of REFUSED_OPS that any method of any of its
    modules calls (each graph with its calls inlined), or that its archive's code (`data`) writes.

        >>> refused_ops(torch.jit.script(torch.nn.ReLU())) is None
        True
    """
    kinds: set[str] = set()
    for _, sub in model.named_modules():
        for name in sub._c._method_names():
            graph = sub._c._get_method(name).graph.copy()
            torch._C._jit_pass_inline(graph)  # what its calls to functions and other modules' methods run
            _graph_kinds(graph, kinds)
    for op, why in REFUSED_OPS.items():
        if op in kinds:
            return f"its TorchScript code calls {op}, which {why}; the judge does not run such a model"
    if data:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for info in z.infolist():
                if "/code/" in f"/{info.filename}" and info.filename.endswith(".py"):
                    found = REFUSED_CODE.search(z.read(info).decode("utf-8", "replace"))
                    if found:
                        return (f"its TorchScript code calls {found.group(0).rstrip('( ')} (a clock or files); the "
                                "judge does not run such a model")
    return None


ONNX_DOMAINS = ("", "ai.onnx")  # the standard operators only: no custom-op library, no model-local functions
MAX_DIM, MAX_ELEMENTS = 1 << 16, 1 << 26  # a declared dimension / tensor larger than this is refused unread


def _graphs(graph):
    """`graph` and every subgraph of its nodes (If, Loop, Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for a in node.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _graphs(g)


class CheckFailed(ValueError):
    """An ONNX model `check_onnx` refuses (the reason is its message)."""


def check_onnx(model, sample: list[int], classes: int) -> None:
    """Refuse, with the reason, an ONNX model the judge does not run: weights outside the file (external data:
    one file, whose bytes are its size), operators outside the standard domain (custom ops need a library of
    code), a declared shape over MAX_DIM / MAX_ELEMENTS, or an input/output that is not one image batch
    (batch, *sample) of floats in, one (batch, classes) of scores out."""
    from onnx import TensorProto

    if model.functions:
        raise CheckFailed(f"it defines its own functions ({model.functions[0].domain}.{model.functions[0].name}): "
                         "only the standard ONNX operators are run")
    for op in model.opset_import:
        if op.domain not in ONNX_DOMAINS:
            raise CheckFailed(f"it imports the operator domain {op.domain[:60]!r}: only the standard ONNX operators "
                             "are run (no custom operators)")
    for g in _graphs(model.graph):
        tensors, sparse = list(g.initializer), list(g.sparse_initializer)
        for node in g.node:
            if node.domain not in ONNX_DOMAINS:
                raise CheckFailed(f"node {node.name[:60]!r} uses the custom operator {node.domain[:60]}.{node.op_type[:60]}: "
                                 "only the standard ONNX operators are run")
            tensors += [a.t for a in node.attribute if a.HasField("t")] + [t for a in node.attribute for t in a.tensors]
            sparse += [a.sparse_tensor for a in node.attribute if a.HasField("sparse_tensor")]
            sparse += [t for a in node.attribute for t in a.sparse_tensors]
        tensors += [t for st in sparse for t in (st.values, st.indices)]  # a sparse tensor's two parts
        for t in tensors:
            if t.data_location == TensorProto.EXTERNAL or t.external_data:
                raise CheckFailed(f"tensor {t.name[:60]!r} keeps its data outside the file (external data): submit one "
                                 "self-contained .onnx file (its bytes are its size)")
        for v in list(g.input) + list(g.output) + list(g.value_info):
            dims = [d.dim_value for d in v.type.tensor_type.shape.dim if d.HasField("dim_value")]
            if any(d > MAX_DIM for d in dims) or int(np.prod(dims, dtype=np.float64)) > MAX_ELEMENTS:
                raise CheckFailed(f"{v.name[:60]!r} declares the shape {dims[:8]}: over {MAX_DIM} in one dimension or "
                                 f"{MAX_ELEMENTS} elements in all")
    inits = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in inits]
    want_in, want_out = ["batch", *sample], ["batch", classes]
    for what, vs, want in (("input", inputs, want_in), ("output", list(model.graph.output), want_out)):
        if len(vs) != 1:
            raise CheckFailed(f"it has {len(vs)} {what}s, expected one: {what} of shape {want}")
        tt = vs[0].type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if tt.elem_type != TensorProto.FLOAT or len(dims) != len(want) or any(
                d is not None and w != "batch" and d != w for d, w in zip(dims, want)) or dims[0] not in (None, 1):
            raise CheckFailed(f"its {what} {vs[0].name[:60]!r} is {TensorProto.DataType.Name(tt.elem_type)} of shape "
                             f"{['?' if d is None else d for d in dims]}, expected FLOAT of shape {want} "
                             "(batch: 1 or a named dimension)")


class OnnxModel:
    """An .onnx file run by ONNX Runtime on one thread (no Python code from the file runs): called with one
    image batch (a tensor), it answers the scores as an array; `state`: its weights (`onnx_state`)."""

    def __init__(self, data: bytes, sample: list[int], classes: int) -> None:
        import onnx
        import onnxruntime

        from tinytorch.benchmarking.results import onnx_state

        try:
            model = onnx.load_from_string(data)
            if not model.graph.node:
                raise ValueError("no graph")
            check_onnx(model, sample, classes)  # before the checker, which would follow an external-data path
            onnx.checker.check_model(model)
        except CheckFailed:
            raise
        except Exception as e:  # protobuf's and the checker's errors: whatever the bytes are, not a model
            first = (str(e).strip().splitlines() or [""])[0]
            raise ValueError(f"not a valid ONNX model ({type(e).__name__}: {first[:160]})") from None
        self.state = onnx_state(model)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1  # one core, as every model is timed
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        # from bytes, not the path: an external-data reference would have no folder to resolve against
        self.session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name

    def __call__(self, x: torch.Tensor) -> np.ndarray:
        return self.session.run(None, {self.input: x.numpy()})[0]


def trace(path: str, x: torch.Tensor) -> tuple[bytes, str, str]:
    """The model in `path` as a TorchScript trace on `x` (archive bytes), the hash of its weights as
    loaded, and what the file was. A weights-only state dict is the course's DigitsCNN (no code of the
    file runs); anything else is unpickled (its code runs: in this converting sandbox only)."""
    from tinytorch.benchmarking.olympics import weights_sha256

    try:
        obj, kind = torch.load(path, map_location="cpu", weights_only=True), "state dict of DigitsCNN"
    except Exception:  # not loadable without code: a pickled module
        obj, kind = torch.load(path, map_location="cpu", weights_only=False), "pickled module"
    if isinstance(obj, dict):
        from tinytorch.benchmarking.digits import DigitsCNN

        model = DigitsCNN()
        model.load_state_dict(obj)
        obj = model
    if not isinstance(obj, torch.nn.Module):
        raise TypeError(f"the file holds a {type(obj).__name__}, not a torch.nn.Module")
    obj.eval()
    sha = weights_sha256(obj)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(obj, x, check_trace=False)
    buf = io.BytesIO()
    torch.jit.save(traced, buf)
    return buf.getvalue(), sha, kind


def owned(out):
    """A call's answer as this server's own copy, taken at once (a model may keep the tensor it returned and write
    into it on a later call; `as_array` is a view): `clone` (~2 us a call here, the same for every model, against
    5-6 us for a converted array), converted by `as_array` after the request; anything else as it is (`as_array`
    refuses it)."""
    if isinstance(out, torch.Tensor):
        return out.clone()
    return out.copy() if isinstance(out, np.ndarray) else out


def as_array(out) -> np.ndarray:
    if isinstance(out, np.ndarray) and out.dtype.kind == "f":  # an ONNX model's answer
        return out.astype(np.float32, copy=False)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the model returned a {type(out).__name__}, expected a tensor of class scores")
    return out.detach().float().cpu().numpy()


def pin_threads(cpu: int) -> None:
    """Every thread of this process onto core `cpu` (sched_setaffinity moves one thread; threads made later
    inherit it): the imports ran on every core, the models are timed on this one."""
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), {cpu})


class OutputFlood(RuntimeError):
    """A model printed more than OUTPUT_CHARS characters."""


class CappedOutput(io.TextIOBase):
    """sys.stdout / sys.stderr of a measuring process: a model's output (TorchScript's `print` writes here) is
    counted and dropped; a call after which more than `cap` characters were written in all fails (`check`),
    saying how much the model wrote."""

    def __init__(self, server: "Server", cap: int = OUTPUT_CHARS) -> None:
        self.server, self.cap, self.chars = server, cap, 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.chars += len(s)
        return len(s)

    def check(self) -> None:
        if self.chars > self.cap:
            calls = max(self.server.calls, 1)
            self.server.flood = (f"the model wrote {self.chars:,} characters of output in {calls:,} "
                                 f"call{'s' if calls > 1 else ''} ({self.chars // calls:,} per call); a model's "
                                 f"output is capped at {self.cap:,} characters in all")
            raise OutputFlood(self.server.flood)


def recv_into(sock: socket.socket, view: memoryview) -> None:
    """Fill `view` from the socket (the judge's raw bytes land where they are used, and nowhere else)."""
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise EOFError("the judge closed the channel")
        got += n


def reason(e: BaseException) -> str:
    """An error as one line: TorchScript's own first line ("The following operation failed in the TorchScript
    interpreter.") says nothing, so its last line, which names what failed, is taken instead."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if lines and lines[0].startswith("The following operation failed") and len(lines) > 1:
        return lines[-1][:300]
    return f"{type(e).__name__}: {(lines or [''])[0][:300]}"


class Server:
    def __init__(self, sock: socket.socket, converting: bool = False) -> None:
        self.sock = sock
        self.models: dict[str, object] = {}
        self.converting = converting
        self.staged: list[torch.Tensor] = []   # the next request's inputs: one newly allocated tensor per call
        self.sample: list[int] | None = None
        self.timed: list[object] = []          # copies of the outputs of the last timed request, until fetched
        self.call_ns: list[int] = []           # how long each of its calls took, timed here call by call
        self.files: dict[str, bytearray] = {}  # a model file's bytes, sent by the judge in parts, until loaded
        self.calls, self.flood = 0, None       # model calls so far; why the output cap stopped a call
        self.output = CappedOutput(self)

    def _raw(self, n: int) -> bytearray:
        buf = bytearray(n)
        recv_into(self.sock, memoryview(buf))
        return buf

    def handle(self, msg: dict) -> dict:
        op = msg.get("op")
        if op == "ready":
            if msg.get("cpu") is not None:
                pin_threads(int(msg["cpu"]))
            return {}
        if op == "file":  # part of a model file: the measuring sandbox holds no file a model could read at run time
            self.files.setdefault(str(msg["role"]), bytearray()).extend(self._raw(int(msg["nbytes"])))
            return {}
        if op == "stage":
            count, sample = int(msg["count"]), [int(d) for d in msg["sample"]]
            per = 4 * int(np.prod(sample))
            if int(msg["nbytes"]) != count * per:
                raise ValueError("a staged request whose byte count does not match its images")
            self.staged = []
            for _ in range(count):  # each call's input its own allocation, filled straight from the socket
                x = torch.empty([1, *sample], dtype=torch.float32)
                recv_into(self.sock, memoryview(x.numpy()).cast("B"))
                self.staged.append(x)
            return {}
        if op == "load":
            kinds, needs, tensors = {}, [], {}
            for role, name in msg["models"].items():
                data = bytes(self.files.pop(role, b""))
                if name.endswith(".onnx"):
                    try:
                        model = OnnxModel(data, msg["sample"], msg["classes"])
                    except Exception as e:  # the file's fault: said with its role
                        raise ValueError(f"{role} model (ONNX): {e}") from None
                    self.models[role], kinds[role] = model, "ONNX, run by ONNX Runtime (one thread)"
                    tensors[role] = encode(summarize(list(model.state.items())), refs=None)
                    continue
                try:  # what the bytes hold, read before any of the model's own code (its __setstate__) runs
                    tensors[role] = encode(summarize(file_tensors(data)), refs=None)
                except Exception:  # not an archive the walk can read: the model is still loaded and judged
                    tensors[role] = encode([], refs=None)
                got = load_code_free(data)
                if got is None:
                    needs.append(role)
                    continue
                why = refused_ops(got[0], data)
                if why:
                    raise ValueError(f"{role} model: {why}")
                self.models[role], kinds[role] = got
            return {"kinds": kinds, "needs_code": needs, "tensors": tensors}
        if op == "trace":
            if not self.converting:
                raise ValueError("this server measures: it does not load files that need their own code")
            if not self.staged:
                raise ValueError("no image staged to trace on")
            archive, sha, kind = trace(msg["path"], self.staged[0])
            return {"torchscript": encode(archive, refs=None), "sha256": sha, "kind": kind}
        if op == "hash":
            model = self.models[msg["role"]]
            return {"sha256": state_dict_sha256(model.state if isinstance(model, OnnxModel) else model_state(model))}
        if op == "outputs":  # not timed: the judge checks the timed calls' answers after timing them
            timed, self.timed = self.timed, []
            outs = [as_array(out) for out in timed]  # each a copy taken when its call returned
            return {"outputs": encode(np.concatenate(outs) if outs else np.zeros((0, 0), np.float32), refs=None),
                    "call_ns": encode(np.asarray(self.call_ns, dtype=np.int64), refs=None)}
        model = self.models[msg["role"]]
        staged, self.staged = self.staged, []
        with torch.inference_mode():
            if op == "predict":
                outs = []
                for x in staged:
                    self.calls += 1
                    outs.append(as_array(owned(model(x))))  # as it was when returned: a later call cannot fill it in
                    self.output.check()
                return {"outputs": encode(np.concatenate(outs) if outs else np.zeros((0, 0), np.float32), refs=None)}
            if op == "time":
                kept = self.timed = []
                ns = self.call_ns = []
                clock = time.perf_counter_ns
                for x in staged:  # judged later: the timed work is the judged work
                    self.calls += 1
                    t0 = clock()
                    out = model(x)
                    ns.append(clock() - t0)
                    # copied as soon as its clock stops: a placeholder that a later call of the request fills in
                    # (one batched forward at the request's end) is judged as the zeros it was when returned
                    kept.append(owned(out))
                self.output.check()  # after the request: its time is the model's own, counting is not
                return {}
        raise ValueError(f"unknown request {op!r}")


def serve(sock: socket.socket, converting: bool) -> None:
    server = Server(sock, converting)
    if not converting:  # a model's printed output is counted and capped, never a flood in a log
        sys.stdout = sys.stderr = server.output
    while True:
        try:
            msg = recv(sock)
        except EOFError:
            return
        if msg.get("op") == "bye":
            return
        try:
            reply = {"ok": True, **server.handle(msg)}
        except BaseException as e:  # the student's model failed: the judge reports it as that student's error
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            reply = {"ok": False, "error": server.flood or reason(e)}
        send(sock, reply)


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)  # every model on one core: the judge compares models, not thread counts
    if argv[0] == "--trace":
        serve(socket.socket(fileno=int(argv[1])), converting=True)
        return
    roles = dict(a.split("=", 1) for a in argv)
    children = []
    for role, fd in roles.items():  # one process per model, forked before any model's bytes arrive
        pid = os.fork()
        if pid == 0:
            for other in roles.values():
                if other != fd:
                    os.close(int(other))
            with open("/proc/self/comm", "w") as f:  # how the judge finds this model's process from outside
                f.write(f"tito-{role}"[:15])
            try:
                serve(socket.socket(fileno=int(fd)), converting=False)
            finally:
                os._exit(0)
        children.append(pid)
    for fd in roles.values():
        os.close(int(fd))
    for _ in children:
        try:
            os.wait()
        except ChildProcessError:
            break


if __name__ == "__main__":
    main(sys.argv[1:])
