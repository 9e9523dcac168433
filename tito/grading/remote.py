"""The judge's view of the student's objects: proxies that forward every use to the sandboxed host.

A test in the judge calls `BenchmarkResult("x", [1.0, 2.0])` where `BenchmarkResult` is a proxy
of the student's class: the call runs in the host, and what comes back is either data (numbers,
strings, containers, arrays, tensors: the judge's own Python objects, built by its own decoder) or
another proxy. Nothing the student wrote ever runs in the judge:

- `==` between proxies compares the *data* of the two objects (their public attributes, as the
  host snapshots them), never the student's `__eq__`; a proxy is never equal to a plain value;
- `isinstance(p, C)` is answered by the judge: a proxy's type is a judge-made class per host class
  (so `type(p).__name__` reads as usual), and for host classes the judge also has (torch's, the
  course's reference modules') `p.__class__` names that class;
- an object of a dataclass the judge has too (a reference BenchmarkResult that the student's code
  returned) is rebuilt here from its fields by the judge's own class: data, not a proxy;
- an exception raised by the student's code arrives as data and is raised in the judge as the
  built-in type it derives from (or a judge-made subclass of it with the student's class name);
- the judge's functions handed to the student's code (a spy clock, a callback) stay in the
  judge: the host gets a stub that calls back over the channel;
- other judge objects (a model the test built, a DataFrame: the input of the call) are pickled *to*
  the host, never code or objects that carry the test's own data (`refuse_data`: a fake's state,
  a function's captured values); nothing pickled is ever accepted *from* it ("$pk" in a reply is a
  ProtocolError).

    >>> Session  # doctest: +ELLIPSIS
    <class '...Session'>
"""
from __future__ import annotations

import base64
import builtins
import io
import sys
import types
from typing import Any

from tito.isolation.protocol import MAX_HOST_FRAME, NAMESPACE, Endpoint, Interned, ProtocolError, decode, encode

RESERVED = "_tito_"
# dunder attributes a proxy asks the host for; any other dunder is not forwarded (libraries probe
# objects for __array_interface__, __reduce_ex__, __deepcopy__, ... and must get an AttributeError)
FORWARDED_DUNDERS = {"__name__", "__qualname__", "__module__", "__doc__", "__wrapped__", "__dict__",
                     "__self__", "__func__"}
MAX_TEXT = 4000
_NO_EXC = {"StopIteration", "StopAsyncIteration", "GeneratorExit", "KeyboardInterrupt", "SystemExit",
           "BaseExceptionGroup", "ExceptionGroup"}


class HostError(Exception):
    """An exception the student's code raised whose built-in base is not a plain Exception subclass
    (SystemExit, KeyboardInterrupt, ...): the test sees it as an ordinary error."""


class RemoteType(type):
    """Metaclass of the judge-made class of each host class: calling it constructs in the host,
    class attributes are read from the host."""

    def __call__(cls, *args, **kwargs):
        s: Session = cls.__dict__[RESERVED + "s"]
        return s.request("call", h=cls.__dict__[RESERVED + "h"], args=s.encode(list(args)), kwargs=s.encode(kwargs))

    def __getattr__(cls, name):
        if name.startswith(RESERVED) or (name.startswith("__") and name not in FORWARDED_DUNDERS):
            raise AttributeError(name)
        s: Session = cls.__dict__[RESERVED + "s"]
        return s.request("getattr", h=cls.__dict__[RESERVED + "h"], attr=name)

    def __repr__(cls):
        return f"<class {cls.__qualname__!r} in the student's code>"


class Remote:
    """A host object. Every use is a call to the host (see module doc)."""

    def __getattr__(self, name):
        if name.startswith(RESERVED) or (name.startswith("__") and name not in FORWARDED_DUNDERS):
            raise AttributeError(name)
        return _s(self).request("getattr", h=_h(self), attr=name)

    def __setattr__(self, name, value):
        if name.startswith(RESERVED):
            raise AttributeError(f"{name} is reserved")
        s = _s(self)
        s.request("setattr", h=_h(self), attr=name, value=s.encode(value))

    def __delattr__(self, name):
        _s(self).request("delattr", h=_h(self), attr=name)

    def __call__(self, *args, **kwargs):
        s = _s(self)
        return s.request("call", h=_h(self), args=s.encode(list(args)), kwargs=s.encode(kwargs))

    def __getitem__(self, key):
        s = _s(self)
        return s.request("getitem", h=_h(self), key=s.encode(key))

    def __setitem__(self, key, value):
        s = _s(self)
        s.request("setitem", h=_h(self), key=s.encode(key), value=s.encode(value))

    def __delitem__(self, key):
        s = _s(self)
        s.request("delitem", h=_h(self), key=s.encode(key))

    def __len__(self):
        n = _s(self).request("len", h=_h(self))
        if type(n) is not int or n < 0:
            raise TypeError(f"len() of the student's object gave {n!r}")
        return n

    def __iter__(self):
        items = _s(self).request("iter", h=_h(self))
        if type(items) is not list:
            raise TypeError("iterating the student's object did not give a list")
        return iter(items)

    def __next__(self):
        return _s(self).request("next", h=_h(self))

    def __contains__(self, item):
        s = _s(self)
        return s.request("contains", h=_h(self), item=s.encode(item)) is True

    def __enter__(self):
        return _s(self).request("enter", h=_h(self))

    def __exit__(self, et, ev, tb):
        s = _s(self)
        if s.endpoint.broken:  # a timed-out test: nothing more to say to that host
            return False
        swallowed = s.request("exit", h=_h(self), exc=judge_error(ev) if ev is not None else None) is True
        # the student's __exit__ may swallow its own code's exception, never the test's (a failed assert)
        return swallowed and (ev is None or getattr(ev, "__tito_host__", None) is not None)

    def __float__(self):
        return _number(_s(self).request("float", h=_h(self)), float)

    def __int__(self):
        return _number(_s(self).request("int", h=_h(self)), int)

    def __index__(self):
        return _number(_s(self).request("index", h=_h(self)), int)

    def __bool__(self):
        return True  # truthiness of the student's object is not asked of the student's code

    def __eq__(self, other):
        if not isinstance(other, Remote):
            return False
        if _h(self) == _h(other):
            return True
        mine, theirs = _s(self).snapshot(self), _s(other).snapshot(other)
        return mine is not None and type(self) is type(other) and mine == theirs

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(("tito-remote", _h(self)))

    def __repr__(self):
        s = _s(self)
        if s.endpoint.broken:
            return f"<{type(self).__name__} object of the student's code>"
        try:
            text = s.request("repr", h=_h(self))
        except Exception:  # noqa: BLE001 - a repr used inside a failure message must not hide the failure
            return f"<{type(self).__name__} object of the student's code>"
        return text if type(text) is str else "<?>"

    def __str__(self):
        text = _s(self).request("str", h=_h(self))
        return text if type(text) is str else repr(self)

    def __format__(self, spec):
        if not spec:
            return str(self)
        text = _s(self).request("format", h=_h(self), spec=spec)
        return text if type(text) is str else repr(self)

    @property
    def __class__(self):
        return type(self).__dict__.get(RESERVED + "mirror") or type(self)


def _s(p) -> "Session":
    return object.__getattribute__(p, RESERVED + "s")


def _h(p) -> int:
    return object.__getattribute__(p, RESERVED + "h")


def _number(v, kind):
    if type(v) is bool or not isinstance(v, (int, float)):
        raise TypeError(f"expected a number from the student's object, got {type(v).__name__}")
    return kind(v)


def _resolve(module: str, qualname: str, graded: set[str]):
    """The judge's own class `module.qualname`: only a class the judge has imported (never an import
    here), defined in that module under that name (a student's class may claim any name, and a
    path through module attributes could reach anything), and never one of the student's modules,
    builtins, or the judge's own code."""
    if (module in graded or module in ("builtins", "__main__") or module.startswith(("tito.", "__"))
            or "<locals>" in qualname or not qualname):
        return None
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None) if obj is not None else None
        if not isinstance(obj, type):
            return None
    return obj if obj.__module__ == module and obj.__qualname__ == qualname else None


class Session:
    """The judge's side of one host child: calls, proxies, callbacks.

    `graded`: the module names the notebook under test exports (the student's code: never resolved
    to a judge class); `lib`: the course package.
    """

    def __init__(self, sock, graded: set[str], lib: str = "tinytorch"):
        self.endpoint = Endpoint(sock, self._serve, MAX_HOST_FRAME)  # the student's replies: a smaller cap
        self.graded = set(graded)
        self.lib = lib  # the course package: only its dataclasses are rebuilt from the host's data
        self.objects: dict[int, Any] = {}     # handle -> proxy
        self.types: dict[int, Any] = {}       # handle of a host class -> judge-made class (or the judge's own)
        self.callbacks = Interned()           # id -> judge callable the host may call
        self.revoked: set[int] = set()        # callbacks of tests that have ended (`revoke`)
        self.running = False  # encoding what in_student_process sends, or a callback's result (see `pickle`)

    # ---- calls ----------------------------------------------------------------------------------

    def request(self, op: str, **kw) -> Any:
        reply = self.endpoint.call({"op": op, **kw})
        try:
            if "err" in reply:
                err = self.decode(reply["err"])
                if not isinstance(err, BaseException):
                    raise ProtocolError("an error reply must hold an exception")
            elif "ok" in reply:
                return self.decode(reply["ok"])
            else:
                raise ProtocolError("a reply holds neither ok nor err")
        except ProtocolError as e:  # a host that sends what is not data is not asked again
            self.endpoint.broken = self.endpoint.broken or f"ProtocolError: {e}"
            raise
        raise err

    def snapshot(self, proxy) -> dict | None:
        snap = self.request("snapshot", h=_h(proxy))
        return snap if isinstance(snap, dict) else None

    def _serve(self, m: dict) -> dict:
        """The host calls a judge callback."""
        if m.get("op") != "callback" or type(m.get("cb")) is not int or m["cb"] not in self.callbacks:
            raise ProtocolError(f"the host may only call back a judge callable, got op {m.get('op')!r}")
        if m["cb"] in self.revoked:
            return {"err": judge_error(RuntimeError(
                f"the test's function #{m['cb']} belongs to a test that has ended: it can no longer be called"))}
        fn = self.callbacks[m["cb"]]
        args, kwargs = self.decode(m.get("args", [])), self.decode(m.get("kwargs", {"$d": []}))
        if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
            raise ProtocolError("callback arguments must be a list and a dict with string keys")
        try:
            result = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - handed to the student's code as its error
            return {"err": judge_error(e)}
        running, self.running = self.running, True  # a reading is data: never the fake itself (refuse_data)
        try:
            return {"ok": self.encode(result)}
        finally:
            self.running = running

    # ---- values ---------------------------------------------------------------------------------

    def decode(self, value: Any) -> Any:
        return decode(value, self._tag)

    def _tag(self, tag: str, payload: Any) -> Any:
        if tag == "$r":
            return self._proxy(payload)
        if tag == "$e":
            return self._exception(payload)
        if tag == "$cb":
            if type(payload) is not int or payload not in self.callbacks:
                raise ProtocolError("$cb: unknown callback")
            return self.callbacks[payload]
        if tag == "$pk":
            raise ProtocolError("pickled bytes from the student's process are refused: only data crosses into the judge")
        raise ProtocolError(f"{tag}: the host may not send this")

    def _proxy(self, d: Any) -> Any:
        if type(d) is not dict or type(d.get("id")) is not int or d.get("kind") not in ("object", "class", "function", "module"):
            raise ProtocolError("$r: bad reference")
        mro = d.get("mro")
        if type(mro) is not list or not mro or not all(
                type(e) is list and len(e) == 5 and type(e[0]) is int and all(type(x) is str for x in e[1:4])
                and (e[4] is None or type(e[4]) is str) for e in mro):
            raise ProtocolError("$r: bad class list")
        if d["kind"] == "class":
            return self._class(mro)
        h = d["id"]
        if h not in self.objects:
            cls = self._class(mro)
            if not isinstance(cls, RemoteType):
                built = self._rebuild(h, cls)
                if built is not None:
                    self.objects[h] = built
                    return built
                cls = self._plain(mro)
            p = object.__new__(cls)
            object.__setattr__(p, RESERVED + "s", self)
            object.__setattr__(p, RESERVED + "h", h)
            self.objects[h] = p
        return self.objects[h]

    def _rebuild(self, h: int, cls: type) -> Any:
        """A judge object of the judge's own dataclass `cls` made from the host object's fields: a
        result of the course's reference code (a BenchmarkResult a student's Benchmark returned) is
        then the reference's object, built by the reference's constructor from the student's data.
        None when `cls` is no dataclass or the data does not make one."""
        import dataclasses

        if not dataclasses.is_dataclass(cls) or cls.__module__.split(".")[0] != self.lib:
            return None
        fields = self.request("fields", h=h)
        if not isinstance(fields, dict) or not all(type(k) is str for k in fields):
            return None
        try:
            return cls(**fields)
        except Exception:  # noqa: BLE001 - data the reference refuses: keep asking the host
            return None

    def _plain(self, mro: list) -> type:
        """A judge-made class for an object whose class the judge has (a torch module's instance):
        it is proxied all the same, with `__class__` naming the judge's class."""
        h, module, qualname, name, _ = mro[0]
        key = -h - 1
        if key not in self.types:
            self.types[key] = self._make(h, name, qualname, module, (Remote,), mirror=self._mirror(mro))
        return self.types[key]

    def _mirror(self, mro: list):
        for _, module, qualname, _, _ in mro:
            found = _resolve(module, qualname, self.graded)
            if found is not None and found is not object:
                return found
        return None

    def _class(self, mro: list):
        """The judge's class for host class mro[0] (its MRO follows)."""
        h, module, qualname, name, exc = mro[0]
        if h in self.types:
            return self.types[h]
        own = _resolve(module, qualname, self.graded)
        if own is not None and not (issubclass(own, BaseException) and not issubclass(own, Exception)):
            self.types[h] = own
            return own
        rest = mro[1:]
        if exc is not None:  # an exception class: a real exception class of the judge
            base = None
            for i, e in enumerate(rest):
                if e[4] is None:
                    continue
                if e[1] == "builtins":
                    base = getattr(builtins, e[3], None)
                else:
                    base = _resolve(e[1], e[2], self.graded) or self._class(rest[i:])
                break
            if isinstance(base, type) and not issubclass(base, Exception):
                base = HostError
            if not (isinstance(base, type) and issubclass(base, Exception)) or base.__name__ in _NO_EXC:
                base = HostError
            try:
                cls = type(name if name.isidentifier() else "StudentError", (base,),
                           {"__module__": module, "__qualname__": qualname, RESERVED + "h": h})
            except TypeError:
                cls = type("StudentError", (HostError,), {RESERVED + "h": h})
            self.types[h] = cls
            return cls
        bases = []
        for i, e in enumerate(rest):
            if e[4] is None and _resolve(e[1], e[2], self.graded) is None and not (e[1] == "builtins"):
                b = self._class(rest[i:])
                if isinstance(b, RemoteType) and not any(issubclass(x, b) for x in bases):
                    bases.append(b)
        cls = None
        if bases:
            try:
                cls = self._make(h, name, qualname, module, tuple(bases), self._mirror(mro))
            except TypeError:  # an MRO the judge cannot rebuild: proxy without the chain
                cls = None
        self.types[h] = cls or self._make(h, name, qualname, module, (Remote,), self._mirror(mro))
        return self.types[h]

    def _make(self, h: int, name: str, qualname: str, module: str, bases: tuple, mirror) -> type:
        ns = {"__module__": module, "__qualname__": qualname, RESERVED + "s": self, RESERVED + "h": h,
              RESERVED + "mirror": mirror, "__doc__": None}
        return RemoteType(name if name.isidentifier() else "StudentClass", bases, ns)

    def _exception(self, d: dict) -> BaseException:
        """The judge's exception for the host's: the student's class as the judge made it, or the
        built-in it derives from; always an Exception (a host can never raise the judge's own
        BaseExceptions, such as its time limit, or anything the judge would not catch)."""
        made = lambda c: isinstance(c, type) and issubclass(c, Exception) and RESERVED + "h" in c.__dict__  # noqa: E731
        exc_cls = d.get("cls") if made(d.get("cls")) else None
        if exc_cls is None:
            base = getattr(builtins, d["base"], None)
            ok = isinstance(base, type) and issubclass(base, Exception) and d["base"] not in _NO_EXC
            exc_cls = base if ok else HostError
        args = d["args"]
        try:
            err = exc_cls(*args)
            if str(err) != d["msg"] and exc_cls is not KeyError:
                err = exc_cls(d["msg"])
        except Exception:  # noqa: BLE001 - a constructor that wants other arguments
            err = exc_cls.__new__(exc_cls)
            err.args = (d["msg"],)
        err.__tito_host__ = {"type": d["type"], "module": d["module"], "traceback": d["tb"][-MAX_TEXT:]}
        return err

    def encode(self, value: Any) -> Any:
        return encode(value, self._ref, tracebacks=False)  # no text of the test's code goes to the host

    def _ref(self, obj: Any) -> dict:
        h = _handle_of(obj)
        if h is not None:
            return {"$h": h}
        if _is_callback(obj):
            return {"$cb": self.callbacks.number(obj)}
        return {"$pk": self.pickle(obj)}

    def callback_mark(self) -> int:
        """How many callbacks were handed out so far (`revoke(mark)` ends those handed out after)."""
        return len(self.callbacks)

    def revoke(self, mark: int) -> None:
        """The callbacks handed out since `mark` (one test's) are ended: the host's call of one is
        refused with a clear error, and the same function sent again later gets a new handle."""
        for cid in range(mark + 1, len(self.callbacks) + 1):
            self.revoked.add(cid)
            fn = self.callbacks.get(cid)
            if fn is not None and self.callbacks.ids.get(id(fn)) == cid:
                del self.callbacks.ids[id(fn)]

    def pickle(self, obj: Any, run: bool = False) -> str:
        """`obj` pickled for the host (cloudpickle: classes and functions of the test by value),
        its proxies as handles and its test functions as callbacks. Nothing of what the test knows
        crosses (`refuse_data`): a function sent by value holds no data, and with `run` (the
        function `in_student_process` runs there, and its arguments) no class of the test code
        crosses at all, so no object of the test (a fake, a spy) is ever made in the student's process.
        Raises NotSendable."""
        import cloudpickle

        session = self

        class Pickler(cloudpickle.CloudPickler):
            def persistent_id(self, o):
                h = _handle_of(o)
                if h is not None:
                    return ("h", h)
                if o is not obj and _is_callback(o):
                    return ("cb", session.callbacks.number(o))
                refuse_data(o, run or session.running)
                return None

        if NAMESPACE in sys.modules:  # the test cells' classes travel by value, like __main__'s
            cloudpickle.register_pickle_by_value(sys.modules[NAMESPACE])
        buf = io.BytesIO()
        Pickler(buf, protocol=5).dump(obj)
        return base64.b64encode(buf.getvalue()).decode("ascii")


class NotSendable(TypeError):
    """The test tried to send the student's process an object that carries what the judge knows
    (a fake's state, a function's captured values): a fault of the test code, not of the student."""


def refuse_data(obj: Any, run: bool = False) -> None:
    """Raise NotSendable when `obj`, about to be pickled for the host, carries the test's data.

    The student's code can read everything its process holds (`fn.__self__`, `__closure__`,
    `__defaults__`, `__globals__`, a caller's frame), so a fake or spy stays in the judge and the host
    gets its methods as callback handles. Refused: a bound method sent by value whose object is not
    a module or the student's own; a function sent by value whose closure cells, defaults or the
    test-module names its code reads hold data (anything but None, modules, classes, functions and
    the student's objects); a class of the test code whose methods do so; and with `run` (what
    `in_student_process` sends) any class of the test code, or an instance of one.
    """
    if isinstance(obj, types.MethodType):
        if not (isinstance(obj.__self__, types.ModuleType) or _handle_of(obj.__self__) is not None):
            raise NotSendable(f"{_name(obj)} is a method of a {type(obj.__self__).__name__} object of the test: sent "
                              "by value, the student's code could read that object (fn.__self__); pass the method "
                              "itself to the student's code (it is called back in the judge)")
        return
    if isinstance(obj, types.BuiltinMethodType):
        owner = getattr(obj, "__self__", None)
        if not (owner is None or isinstance(owner, types.ModuleType)):
            raise NotSendable(f"{_name(obj)} is bound to a {type(owner).__name__} of the test, which the student's "
                              "code could read")
        return
    if isinstance(obj, types.FunctionType):
        if not _by_value(obj):
            return
        where = [("closure cell " + name, cell.cell_contents) for name, cell in
                 zip(obj.__code__.co_freevars, obj.__closure__ or ()) if _filled(cell)]
        where += [("default", v) for v in obj.__defaults__ or ()]
        where += [(f"default of {k}", v) for k, v in (obj.__kwdefaults__ or {}).items()]
        where += [(f"global {k}", obj.__globals__[k]) for k in sorted(_code_names(obj.__code__))
                  if k in obj.__globals__]
        for what, value in where:
            if not _no_data(value):
                raise NotSendable(f"{_name(obj)} would carry data to the student's process: its {what} holds a "
                                  f"{type(value).__name__}; pass the values the student's code needs as arguments "
                                  "and keep the test's own values in the judge")
        return
    if isinstance(obj, type) and _test_code(obj):
        if run:
            raise NotSendable(f"class {obj.__qualname__} of the test code would run in the student's process, "
                              "where its objects are readable: make it in the judge and pass its methods")
        for value in vars(obj).values():
            refuse_data(getattr(value, "__func__", value))
        return
    if run and _test_code(type(obj)):
        raise NotSendable(f"a {type(obj).__qualname__} object of the test code would be readable in the student's "
                          "process: keep it in the judge and pass its methods")


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a cell not yet assigned
        return False
    return True


def _code_names(code: types.CodeType) -> set[str]:
    """The global names `code` and the code objects nested in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _no_data(value: Any) -> bool:
    """True for what carries no value of the test: None, modules, classes, functions (themselves
    checked when they are sent by value), builtins of a module, the student's own objects."""
    if value is None or isinstance(value, (types.ModuleType, type, types.FunctionType)):
        return True
    if isinstance(value, types.BuiltinFunctionType):
        return value.__self__ is None or isinstance(value.__self__, types.ModuleType)
    if isinstance(value, types.MethodType):
        return _is_callback(value)  # a method of a judge object crosses as a callback handle
    return _handle_of(value) is not None


def _test_code(cls: type) -> bool:
    return getattr(cls, "__module__", None) in ("__main__", NAMESPACE)


def _by_value(obj: Any) -> bool:
    """Whether cloudpickle sends `obj` (a function or class) by value: it is defined in the test code
    or is not reachable by its module and name."""
    module = getattr(obj, "__module__", None) or ""
    if module in ("__main__", NAMESPACE) or module not in sys.modules:
        return True
    target = sys.modules[module]
    for part in getattr(obj, "__qualname__", "").split("."):
        target = getattr(target, part, None)
    return target is not obj


def judge_error(e: BaseException) -> dict:
    """An exception of the judge's test code, as the host gets it: its built-in type and first
    line only (no traceback, no class, no arguments: nothing of the test's code reaches the host);
    a failed assertion, whose message holds what the test expected, as its type alone."""
    base = next((c.__name__ for c in type(e).__mro__ if getattr(builtins, c.__name__, None) is c), "Exception")
    msg = "" if isinstance(e, AssertionError) else (str(e).strip().splitlines() or [""])[0][:300]
    return {"$e": {"type": base, "module": "builtins", "base": base, "args": [msg], "msg": msg, "tb": ""}}


def _handle_of(obj: Any) -> int | None:
    """The host handle of a proxy, a judge-made class or exception class; None otherwise."""
    if isinstance(obj, Remote):
        return _h(obj)
    if isinstance(obj, type) and RESERVED + "h" in obj.__dict__:
        return obj.__dict__[RESERVED + "h"]
    return None


def _is_callback(obj: Any) -> bool:
    """A judge function the host should call back rather than receive: a bound method of a judge
    object, or a function defined in test code (not in an importable module, not in a class body)."""
    if isinstance(obj, types.MethodType):
        return not isinstance(obj.__self__, types.ModuleType)
    if not isinstance(obj, types.FunctionType):
        return False
    parts = obj.__qualname__.split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return False  # a method in a class body: pickled with its class
    module = sys.modules.get(obj.__module__ or "")
    if module is None or obj.__module__ in ("__main__", NAMESPACE):
        return True
    target = module
    for part in parts:
        target = getattr(target, part, None)
    return target is not obj  # not reachable by its name: not picklable by reference
