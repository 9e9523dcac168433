"""The one message format between the judge (trusted) and the student host (sandboxed), and tito.

A message is a *frame*: 4 bytes of big-endian length, then that many bytes of UTF-8 JSON holding one
object. The same frames carry the judge <-> host calls (over a socket pair), the host's zygote
control messages, and the judge's results to tito (over a pipe). `recv` parses JSON and nothing
else: no code path here turns bytes into objects that run code.

Values inside messages are *tagged JSON*. Plain JSON stays plain (None, bool, int, str, lists of
them, finite floats); everything else is an object with one tag key:

    {"$f": "nan"}                      non-finite float          {"$c": [re, im]}       complex
    {"$t": [...]}  tuple               {"$s": [...]} set          {"$fs": [...]}         frozenset
    {"$d": [[k, v], ...]}  dict (any keys, order kept)            {"$b": base64}         bytes
    {"$nt": {"name", "fields", "values"}}  named tuple            {"$p": "a/b"}          path
    {"$np": {"dtype", "shape", "data"}}    numpy array (numeric and bool dtypes only, raw bytes)
    {"$ns": {"dtype", "data"}}             numpy scalar
    {"$pt": {"dtype", "shape", "data", "grad"}}  torch tensor (dense, raw bytes)
    {"$qt": {...}}                         quantized torch tensor (integers + scale/zero point)
    {"$dt": "float32"} torch dtype         {"$dev": "cpu"} torch device   {"$nd": "float64"} numpy dtype
    {"$e": {"type", "module", "base", "args", "msg", "tb"}}  an exception value
    {"$r": {"id", "name", "module", "qualname", "kind", "mro", "exc"}}  a host object, by reference
    {"$cb": id}   a judge callable (the host calls it back)   {"$h": id}   a host object sent back
    {"$pk": base64}   pickled judge object (judge -> host only; the judge refuses it)

`decode(value, refs)` is strict: unknown tags, wrong types, dtypes outside the allow-list,
inconsistent array sizes, nesting deeper than MAX_DEPTH or more than MAX_ITEMS values raise
ProtocolError. What a tag such as "$r" or "$pk" becomes is decided by the caller's `refs`
handler; the judge's handler refuses "$pk" (tito.grading.remote).

    >>> decode(encode({"a": (1, float("nan"))}, refs=None), refs=None)["a"][0]
    1
"""
from __future__ import annotations

import base64
import json
import math
import socket
import struct
from pathlib import PurePath
from typing import Any, Callable

MAX_FRAME = 256 * 1024 * 1024   # one message; a larger one is a protocol error
# one message the judge accepts from a student's process (a reply, a callback's arguments, a feedback cell): the
# judge's memory is outside the student's cgroup, and decoding costs about 6 times a message's size (red team
# 49: a 184 MB reply took the judge from 386 MB to 1.1 GB); an honest Module 19 grading's largest is far below
MAX_HOST_FRAME = 16 * 1024 * 1024
MAX_DEPTH = 64                   # nesting of containers in one value
MAX_ITEMS = 5_000_000            # values in one message
_HEAD = struct.Struct(">I")
NAMESPACE = "__tito_grading__"  # the module the test cells (judge) and the notebook (host) run in

NUMPY_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "float32", "float64", "complex64", "complex128"}
# torch dtype -> (numpy dtype of the raw bytes, torch dtype to view them as)
TORCH_DTYPES = {"bool": "bool", "uint8": "uint8", "int8": "int8", "int16": "int16", "int32": "int32",
                "int64": "int64", "float16": "float16", "bfloat16": "int16", "float32": "float32",
                "float64": "float64", "complex64": "complex64", "complex128": "complex128"}
QUANT_DTYPES = {"qint8", "quint8", "qint32"}


class ProtocolError(Exception):
    """A frame or value that breaks the message format (the sender is at fault)."""


class TooLarge(ProtocolError):
    """A message over the receiver's limit (not read: the channel is unusable after it)."""


# ---- frames ------------------------------------------------------------------------------------

def dumps(obj: dict) -> bytes:
    data = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"message of {len(data)} bytes is over the {MAX_FRAME}-byte limit")
    return _HEAD.pack(len(data)) + data


def loads(data: bytes) -> dict:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ProtocolError(f"not a JSON message: {type(e).__name__}: {str(e)[:200]}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"a message must be a JSON object, got {type(obj).__name__}")
    return obj


def send(sock: socket.socket, obj: dict) -> None:
    sock.sendall(dumps(obj))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the channel")
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket, limit: int = MAX_FRAME) -> dict:
    """The next message (at most `limit` bytes); EOFError when the peer is gone, ProtocolError when it is
    malformed or larger (read no further: the channel is then unusable)."""
    (n,) = _HEAD.unpack(_recv_exact(sock, _HEAD.size))
    if n > limit:
        raise TooLarge(f"a message of {n:,} bytes, over the limit of {limit:,} bytes for one message")
    return loads(_recv_exact(sock, n))


def write_frame(stream, obj: dict) -> None:
    """A frame on a binary stream (the judge's results to tito)."""
    stream.write(dumps(obj))
    stream.flush()


def read_frames(stream) -> list[dict]:
    """Every complete frame on a binary stream, up to its end (a cut-off last frame is dropped)."""
    out = []
    while True:
        head = stream.read(_HEAD.size)
        if len(head) < _HEAD.size:
            return out
        (n,) = _HEAD.unpack(head)
        if n > MAX_FRAME:
            raise ProtocolError(f"announced a message of {n} bytes, over the {MAX_FRAME}-byte limit")
        data = stream.read(n)
        if len(data) < n:
            return out
        out.append(loads(data))


# ---- values: encoding -------------------------------------------------------------------------

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encode(value: Any, refs: Callable[[Any], dict] | None, _depth: int = 0, tracebacks: bool = True) -> Any:
    """Tagged JSON of `value`; `refs(obj)` gives the tag of anything that is not data (a host
    reference, a callback, a pickle); without `refs` such a value is a ProtocolError. Kinds are
    read from the value's real type (`type(value)`), never from its `__class__`, which can lie.
    `tracebacks=False` (the judge's side) sends exceptions without their traceback text."""
    if _depth > MAX_DEPTH:
        raise ProtocolError(f"value nested deeper than {MAX_DEPTH} levels")
    t = type(value)
    if value is None or t is bool or t is str or t is int:
        return value
    if t is float:
        return value if math.isfinite(value) else {"$f": repr(value)}
    np = _module("numpy")
    torch = _module("torch")
    if np is not None and issubclass(t, np.generic) and value.dtype.name in NUMPY_DTYPES:
        return {"$ns": {"dtype": value.dtype.name, "data": _b64(value.tobytes())}}
    import enum
    if issubclass(t, enum.Enum):  # identity matters (members compare by identity): a reference
        return _ref(value, refs)
    if issubclass(t, bool):
        return bool(value)
    if issubclass(t, int):
        return int.__index__(value)
    if issubclass(t, float):
        return encode(float.__float__(value), refs, _depth, tracebacks)
    if issubclass(t, str):
        return str.__str__(value)
    if issubclass(t, complex):
        return {"$c": [encode(value.real, refs, _depth + 1, tracebacks), encode(value.imag, refs, _depth + 1, tracebacks)]}
    if issubclass(t, (bytes, bytearray)):
        return {"$b": _b64(bytes(value))}
    if issubclass(t, PurePath):
        return {"$p": str(value)}
    if issubclass(t, BaseException):
        return {"$e": exception_info(value, refs, _depth, tracebacks)}
    if issubclass(t, tuple) and hasattr(value, "_fields") and isinstance(value._fields, tuple):
        return {"$nt": {"name": type(value).__name__, "fields": [str(f) for f in value._fields],
                        "values": [encode(v, refs, _depth + 1, tracebacks) for v in tuple.__iter__(value)]}}
    if issubclass(t, tuple):
        return {"$t": [encode(v, refs, _depth + 1, tracebacks) for v in tuple.__iter__(value)]}
    if issubclass(t, list):
        return [encode(v, refs, _depth + 1, tracebacks) for v in list.__iter__(value)]
    if issubclass(t, dict):
        return {"$d": [[encode(k, refs, _depth + 1, tracebacks), encode(v, refs, _depth + 1, tracebacks)] for k, v in dict.items(value)]}
    if issubclass(t, (set, frozenset)):
        return {"$fs" if issubclass(t, frozenset) else "$s": [encode(v, refs, _depth + 1, tracebacks) for v in value]}
    if np is not None and issubclass(t, np.ndarray) and value.dtype.name in NUMPY_DTYPES:
        arr = np.ascontiguousarray(value)
        return {"$np": {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": _b64(arr.tobytes())}}
    if np is not None and issubclass(t, np.dtype) and value.name in NUMPY_DTYPES:
        return {"$nd": value.name}
    if torch is not None:
        if issubclass(t, torch.dtype):
            return {"$dt": str(value).removeprefix("torch.")}
        if issubclass(t, torch.device):
            return {"$dev": str(value)}
        if issubclass(t, torch.Tensor):
            tagged = _tensor(value, torch, refs, _depth)
            if tagged is not None:
                return tagged
    return _ref(value, refs)


def _ref(value: Any, refs: Callable[[Any], dict] | None) -> dict:
    if refs is None:
        raise ProtocolError(f"a {type(value).__name__} is not data")
    return refs(value)


def _tensor(t, torch, refs, depth) -> dict | None:
    if t.layout != torch.strided or t.device.type == "meta":
        return None
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    name = str(t.dtype).removeprefix("torch.")
    if t.is_quantized:
        if name not in QUANT_DTYPES:
            return None
        scheme = str(t.qscheme()).removeprefix("torch.")
        q = {"dtype": name, "scheme": scheme, "int": encode(t.int_repr(), refs, depth + 1)}
        if scheme in ("per_tensor_affine", "per_tensor_symmetric"):
            q.update(scale=float(t.q_scale()), zero_point=int(t.q_zero_point()))
        elif scheme in ("per_channel_affine", "per_channel_symmetric", "per_channel_affine_float_qparams"):
            q.update(scales=encode(t.q_per_channel_scales(), refs, depth + 1),
                     zero_points=encode(t.q_per_channel_zero_points(), refs, depth + 1), axis=int(t.q_per_channel_axis()))
        else:
            return None
        return {"$qt": q}
    if name not in TORCH_DTYPES:
        return None
    t = t.contiguous()
    raw = t.view(torch.int16) if name == "bfloat16" else t
    return {"$pt": {"dtype": name, "shape": list(t.shape), "data": _b64(raw.numpy().tobytes()),
                    "grad": bool(t.requires_grad)}}


def exception_info(e: BaseException, refs, depth: int = 0, tracebacks: bool = True) -> dict:
    """The data of an exception: its type's name and module, the nearest built-in base, its
    arguments where they are data (others as their repr), its message and traceback text."""
    import builtins
    import traceback

    base = next((c.__name__ for c in type(e).__mro__ if getattr(builtins, c.__name__, None) is c), "Exception")
    args = []
    for a in e.args[:8]:
        try:
            args.append(encode(a, None, depth + 1))
        except ProtocolError:
            args.append(_safe_text(lambda: repr(a), 2000))
    tb = ""
    if tracebacks and e.__traceback__ is not None:
        tb = _safe_text(lambda: "".join(traceback.format_exception(type(e), e, e.__traceback__)), 8000)
    info = {"type": type(e).__qualname__, "module": type(e).__module__, "base": base, "args": args,
            "msg": _safe_text(lambda: str(e), 4000), "tb": tb}
    if refs is not None and getattr(builtins, type(e).__name__, None) is not type(e):
        try:
            info["cls"] = refs(type(e))  # the class itself, so the other side can name and catch it
        except ProtocolError:
            pass
    return info


def _safe_text(fn, limit: int) -> str:
    try:
        text = fn()
    except Exception as err:  # noqa: BLE001 - a student's __str__/__repr__ that raises
        text = f"<unprintable: {type(err).__name__}>"
    return text if isinstance(text, str) and type(text) is str and len(text) <= limit else str(text)[:limit]


def _module(name: str):
    import sys
    return sys.modules.get(name)


# ---- values: decoding (strict) ----------------------------------------------------------------

Handler = Callable[[str, Any], Any]


def decode(value: Any, refs: Handler | None, _state: list | None = None, _depth: int = 0,
           allowed: frozenset | set | None = None, max_depth: int = MAX_DEPTH) -> Any:
    """The value of tagged JSON; tags of references ("$r", "$cb", "$h", "$pk") and "$e" go to
    `refs(tag, payload)`. Raises ProtocolError on anything malformed. `allowed`: the only tags taken (before their
    payload is read; a dict's keys then names only), `max_depth`: the deepest nesting taken (what a value that is
    no model's answer would cost the Olympics judge)."""
    state = _state if _state is not None else [0]
    state[0] += 1
    if state[0] > MAX_ITEMS:
        raise ProtocolError(f"more than {MAX_ITEMS} values in one message")
    if _depth > max_depth:
        raise ProtocolError(f"value nested deeper than {max_depth} levels")
    t = type(value)
    if value is None or t in (bool, int, str):
        return value
    if t is float:
        if not math.isfinite(value):
            raise ProtocolError("a non-finite float must be tagged")
        return value
    sub = lambda v: decode(v, refs, state, _depth + 1, allowed, max_depth)  # noqa: E731
    if t is list:
        return [sub(v) for v in value]
    if t is not dict or len(value) != 1:
        raise ProtocolError(f"expected a value, got a {t.__name__}" + (f" with keys {sorted(value)[:5]}" if t is dict else ""))
    (tag, payload), = value.items()
    if allowed is not None and (tag not in allowed or tag == "$d" and not all(
            type(kv) is list and len(kv) == 2 and type(kv[0]) is str for kv in _list(payload, tag))):
        raise ProtocolError(f"unexpected value {tag!r}" + (" (a dict with keys that are not names)" if tag == "$d" else ""))
    if tag == "$f":
        if payload not in ("nan", "inf", "-inf"):
            raise ProtocolError(f"$f: expected nan, inf or -inf, got {payload!r}")
        return float(payload)
    if tag == "$c":
        re_, im = _list(payload, tag, 2)
        return complex(_float(sub(re_), tag), _float(sub(im), tag))
    if tag == "$t":
        return tuple(sub(v) for v in _list(payload, tag))
    if tag in ("$s", "$fs"):
        items = [sub(v) for v in _list(payload, tag)]
        try:
            return frozenset(items) if tag == "$fs" else set(items)
        except TypeError as e:
            raise ProtocolError(f"{tag}: {e}") from None
    if tag == "$d":
        out = {}
        for pair in _list(payload, tag):
            k, v = _list(pair, tag, 2)
            try:
                out[sub(k)] = sub(v)
            except TypeError as e:
                raise ProtocolError(f"$d: {e}") from None
        return out
    if tag == "$b":
        return _unb64(payload, tag)
    if tag == "$p":
        from pathlib import Path
        return Path(_str(payload, tag))
    if tag == "$nt":
        return _namedtuple(payload, sub)
    if tag == "$np":
        return _array(payload)
    if tag == "$ns":
        np = _import("numpy")
        d = _dict(payload, tag, {"dtype", "data"})
        dtype = _dtype(d["dtype"])
        raw = _unb64(d["data"], tag)
        if len(raw) != np.dtype(dtype).itemsize:
            raise ProtocolError(f"$ns: {len(raw)} bytes for one {dtype}")
        return np.frombuffer(raw, dtype=dtype)[0].copy()
    if tag == "$nd":
        return _import("numpy").dtype(_dtype(payload))
    if tag == "$pt":
        return _torch_tensor(payload)
    if tag == "$qt":
        return _quantized(payload, sub)
    if tag == "$dt":
        torch = _import("torch")
        name = _str(payload, tag)
        if name not in TORCH_DTYPES and name not in QUANT_DTYPES:
            raise ProtocolError(f"$dt: unknown torch dtype {name!r}")
        return getattr(torch, name)
    if tag == "$dev":
        torch = _import("torch")
        try:
            return torch.device(_str(payload, tag))
        except (RuntimeError, ValueError) as e:
            raise ProtocolError(f"$dev: {e}") from None
    if tag in ("$r", "$cb", "$h", "$pk", "$e"):
        if refs is None:
            raise ProtocolError(f"{tag}: not data")
        if tag == "$e":
            d = _dict(payload, tag, {"type", "module", "base", "args", "msg", "tb"})
            d = {**d, "args": [sub(a) for a in _list(d["args"], tag)], "cls": sub(d["cls"]) if "cls" in d else None}
            for k in ("type", "module", "base", "msg", "tb"):
                _str(d[k], tag)
            return refs(tag, d)
        return refs(tag, payload)
    raise ProtocolError(f"unknown tag {tag!r}")


def _import(name: str):
    import importlib
    return importlib.import_module(name)


def _list(v, tag, n: int | None = None) -> list:
    if type(v) is not list or (n is not None and len(v) != n):
        raise ProtocolError(f"{tag}: expected a list" + (f" of {n}" if n is not None else ""))
    return v


def _dict(v, tag, keys: set) -> dict:
    if type(v) is not dict or not keys <= set(v):
        raise ProtocolError(f"{tag}: expected an object with {sorted(keys)}")
    return v


def _str(v, tag) -> str:
    if type(v) is not str:
        raise ProtocolError(f"{tag}: expected a string")
    return v


def _float(v, tag) -> float:
    if type(v) not in (int, float):
        raise ProtocolError(f"{tag}: expected a number")
    return float(v)


def _unb64(v, tag) -> bytes:
    try:
        return base64.b64decode(_str(v, tag), validate=True)
    except (ValueError, TypeError):
        raise ProtocolError(f"{tag}: bad base64") from None


def _dtype(name) -> str:
    if type(name) is not str or name not in NUMPY_DTYPES:
        raise ProtocolError(f"dtype {name!r} is not allowed")
    return name


def _shape(v, tag) -> tuple[int, ...]:
    shape = _list(v, tag)
    if len(shape) > 32 or any(type(s) is not int or s < 0 for s in shape):
        raise ProtocolError(f"{tag}: bad shape {shape[:8]}")
    return tuple(shape)


def _array(payload, tag: str = "$np"):
    np = _import("numpy")
    d = _dict(payload, tag, {"dtype", "shape", "data"})
    dtype, shape, raw = _dtype(d["dtype"]), _shape(d["shape"], tag), _unb64(d["data"], tag)
    if math.prod(shape) * np.dtype(dtype).itemsize != len(raw):
        raise ProtocolError(f"{tag}: {len(raw)} bytes do not make a {dtype} array of shape {shape}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _torch_tensor(payload):
    torch = _import("torch")
    d = _dict(payload, "$pt", {"dtype", "shape", "data", "grad"})
    name = d["dtype"]
    if type(name) is not str or name not in TORCH_DTYPES:
        raise ProtocolError(f"$pt: torch dtype {name!r} is not allowed")
    arr = _array({"dtype": TORCH_DTYPES[name], "shape": d["shape"], "data": d["data"]}, "$pt")
    t = torch.from_numpy(arr)
    if name == "bfloat16":
        t = t.view(torch.bfloat16)
    if d["grad"] is True and t.is_floating_point():
        t.requires_grad_(True)
    return t


def _quantized(payload, sub):
    torch = _import("torch")
    d = _dict(payload, "$qt", {"dtype", "scheme", "int"})
    name, scheme, ints = d["dtype"], d["scheme"], sub(d["int"])
    if name not in QUANT_DTYPES or not isinstance(ints, torch.Tensor) or ints.is_floating_point():
        raise ProtocolError("$qt: bad quantized tensor")
    try:
        if scheme in ("per_tensor_affine", "per_tensor_symmetric"):
            return torch._make_per_tensor_quantized_tensor(ints, _float(d.get("scale"), "$qt"),
                                                           int(_float(d.get("zero_point"), "$qt")))
        scales, zps = sub(d.get("scales")), sub(d.get("zero_points"))
        axis = d.get("axis")
        if not (isinstance(scales, torch.Tensor) and isinstance(zps, torch.Tensor) and type(axis) is int):
            raise ProtocolError("$qt: bad per-channel parameters")
        return torch._make_per_channel_quantized_tensor(ints, scales, zps, axis)
    except (RuntimeError, TypeError, ValueError) as e:
        raise ProtocolError(f"$qt: {str(e)[:200]}") from None


_NAMEDTUPLES: dict = {}


def _namedtuple(payload, sub):
    from collections import namedtuple
    d = _dict(payload, "$nt", {"name", "fields", "values"})
    name, fields = _str(d["name"], "$nt"), _list(d["fields"], "$nt")
    values = [sub(v) for v in _list(d["values"], "$nt", len(fields))]
    key = (name, tuple(fields))
    if key not in _NAMEDTUPLES:
        try:
            _NAMEDTUPLES[key] = namedtuple(name if name.isidentifier() else "Row", fields, rename=True)
        except (TypeError, ValueError) as e:
            raise ProtocolError(f"$nt: {e}") from None
    return _NAMEDTUPLES[key](*values)


# ---- one call loop for both sides -------------------------------------------------------------

class ChannelBroken(Exception):
    """The channel cannot be used any more (a call was interrupted, the peer died or misbehaved)."""


MAX_NESTING = 64


class Endpoint:
    """One side of a call channel over `sock`: `call(msg)` sends a request and, while it waits for
    the reply, serves the peer's requests with `serve(msg) -> reply` (nested calls: a host that
    calls back into the judge while it answers the judge). Requests carry "id", replies "re".

    Anything that interrupts a call (a time limit, the peer closing, a malformed message) marks the
    channel broken: a late reply can no longer be matched to its call.
    """

    def __init__(self, sock: socket.socket, serve: Callable[[dict], dict], limit: int = MAX_FRAME):
        self.sock, self.serve, self.limit = sock, serve, limit  # limit: bytes of one message received
        self.next_id = 0
        self.depth = 0
        self.broken: str | None = None

    def call(self, msg: dict) -> dict:
        if self.broken:
            raise ChannelBroken(self.broken)
        self.next_id += 1
        rid = self.next_id
        try:
            send(self.sock, {**msg, "id": rid})
            while True:
                m = recv(self.sock, self.limit)
                if "re" in m:
                    if m["re"] != rid:
                        raise ProtocolError(f"a reply to call {m['re']!r} arrived while call {rid} waited")
                    return m
                self.answer(m)
        except BaseException as e:
            self.broken = self.broken or f"{type(e).__name__}: {str(e)[:300]}"
            raise

    def answer(self, m: dict) -> None:
        """Serve one request `m` of the peer and send the reply."""
        if "op" not in m or type(m.get("id")) is not int:
            raise ProtocolError(f"expected a request or a reply, got keys {sorted(m)[:6]}")
        if self.depth >= MAX_NESTING:
            raise ProtocolError(f"calls nested more than {MAX_NESTING} deep")
        self.depth += 1
        try:
            reply = self.serve(m)
        finally:
            self.depth -= 1
        send(self.sock, {**reply, "re": m["id"]})

    def serve_forever(self) -> None:
        """Answer requests until the peer closes the channel (the host's main loop)."""
        while True:
            try:
                m = recv(self.sock, self.limit)
            except EOFError:
                return
            self.answer(m)


class Interned(dict):
    """Objects numbered from 1 as each is first handed over, each object once (`number`); `self[n]` is the object.
    The host numbers the student's objects it sends (handles), the judge the callbacks it sends."""

    def __init__(self):
        super().__init__()
        self.ids: dict[int, int] = {}  # id(object) -> its number

    def number(self, obj: Any) -> int:
        if id(obj) not in self.ids:
            self[len(self) + 1] = obj
            self.ids[id(obj)] = len(self)
        return self.ids[id(obj)]


def control_send(sock: socket.socket, obj: dict, fds: list[int] | tuple = ()) -> None:
    """One control message (the judge and the grading host's zygote: a JSON object, with file descriptors)."""
    socket.send_fds(sock, [json.dumps(obj).encode("utf-8")], list(fds))


def control_recv(sock: socket.socket, ended: str) -> tuple[dict, list[int]]:
    """The next control message and the descriptors it carried; EOFError(`ended`) when the other side closed."""
    data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 4)
    if not data:
        raise EOFError(ended)
    msg = json.loads(data.decode("utf-8"))
    if not isinstance(msg, dict):
        raise ProtocolError("a control message must be an object")
    return msg, list(fds)
