"""One request over a Unix socket, with file descriptors: an 8-byte length, that many bytes of JSON, and the
descriptors passed with the first bytes (SCM_RIGHTS). What the two forking servers are asked: tito.testing.kernels
(a kernel, with the asker's folder, environment and standard streams) and tito.testing.kept_server (a session, with
the run's environment and log).

    >>> a, b = socket.socketpair()
    >>> send(a, {"env": {"X": "1"}}, [1])
    >>> obj, fds = receive(b, 1); obj
    {'env': {'X': '1'}}
"""
from __future__ import annotations

import json
import os
import socket

MAX_REQUEST = 1 << 20


def send(sock: socket.socket, obj: dict, fds: list[int]) -> None:
    body = json.dumps(obj).encode()
    socket.send_fds(sock, [len(body).to_bytes(8, "big") + body], fds)


def receive(sock: socket.socket, nfds: int, timeout: float = 30.0) -> tuple[dict, list[int]] | None:
    """The request and its `nfds` descriptors, read to its exact length (what the asker sends next stays in the
    socket); None, with any descriptors closed, when it is malformed, over MAX_REQUEST, cut short or not there within
    `timeout` seconds (an asker sends it as it connects)."""
    fds: list[int] = []
    sock.settimeout(timeout)
    try:
        head, fds, _, _ = socket.recv_fds(sock, 8, nfds)
        head += _exactly(sock, 8 - len(head))
        size = int.from_bytes(head, "big") if len(head) == 8 else -1
        body = _exactly(sock, size) if 0 <= size <= MAX_REQUEST else b""
        obj = json.loads(body) if len(fds) == nfds and 0 <= size == len(body) else None
    except (OSError, ValueError):  # socket.timeout included; ValueError: not JSON
        obj = None
    finally:
        sock.settimeout(None)
    if not isinstance(obj, dict):
        for fd in fds:
            os.close(fd)
        return None
    return obj, fds


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        more = sock.recv(n - len(data))
        if not more:
            break
        data += more
    return data
