"""The model server: runs INSIDE one student's sandbox (`python -s -P server.py FD`).

It loads the student's model files (TorchScript, a state dict of the course's DigitsCNN, or a pickled
module: unpickling runs the file's code, which is why this runs only here) and answers the judge over
the stream socket FD, one frame per request (tito.grading.protocol, data only):

    {"op": "load", "models": {role: path}}   -> {"ok": true, "kinds": {role: how it was loaded}}
    {"op": "state", "role": r}               -> {"ok": true, "state": {name: tensor or tuple of them}}
    {"op": "data", "X": array}               -> {"ok": true}            (the test inputs; never the labels)
    {"op": "predict", "role": r}             -> {"ok": true, "outputs": array (N, classes)}
    {"op": "time", "role": r, "start": i, "count": k} -> {"ok": true}  (k single-sample calls; the judge
                                                                         times the request from outside)
    {"op": "bye"}

A failure is {"ok": false, "error": "Type: message"}; the judge decides what it means.
"""
from __future__ import annotations

import socket
import sys
import warnings

import numpy as np
import torch

from protocol import decode, encode, recv, send  # staged beside this file (tito.grading.protocol)

BATCH = 1  # one image a call, as timed: TorchScript specialises on the shapes it sees first (batch 128
           # first made its batch-1 calls 2.3x slower)


def load(path: str) -> tuple[torch.nn.Module, str]:
    """A model from `path`: TorchScript first, then a weights-only state dict of the course's
    DigitsCNN (no code runs), then a pickled module (its code runs: in this sandbox)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.jit.load(path, map_location="cpu").eval(), "TorchScript"
    except RuntimeError:
        pass
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # not loadable without code: a pickled module, tried next
        obj = None
    if isinstance(obj, dict):
        from tinytorch.benchmarking.digits import DigitsCNN

        model = DigitsCNN()
        model.load_state_dict(obj)
        return model.eval(), "state dict of DigitsCNN (weights only)"
    obj = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(obj, torch.nn.Module):
        raise TypeError(f"the file holds a {type(obj).__name__}, not a torch.nn.Module")
    return obj.eval(), "pickled module"


def as_array(out) -> np.ndarray:
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the model returned a {type(out).__name__}, expected a tensor of class scores")
    return out.detach().float().cpu().numpy()


class Server:
    def __init__(self) -> None:
        self.models: dict[str, torch.nn.Module] = {}
        self.X: torch.Tensor | None = None

    def handle(self, msg: dict) -> dict:
        op = msg.get("op")
        if op == "load":
            kinds = {}
            for role, path in msg["models"].items():
                self.models[role], kinds[role] = load(path)
            return {"kinds": kinds}
        if op == "state":
            from tinytorch.benchmarking.olympics import model_state

            return {"state": encode(model_state(self.models[msg["role"]]), refs=None)}
        if op == "data":
            self.X = torch.from_numpy(np.ascontiguousarray(decode(msg["X"], refs=None)))
            return {}
        model = self.models[msg["role"]]
        with torch.inference_mode():
            if op == "predict":
                outs = [as_array(model(self.X[i:i + BATCH])) for i in range(0, len(self.X), BATCH)]
                return {"outputs": encode(np.concatenate(outs), refs=None)}
            if op == "time":
                n = len(self.X)
                for j in range(msg["start"], msg["start"] + msg["count"]):
                    model(self.X[j % n:j % n + 1])
                return {}
        raise ValueError(f"unknown request {op!r}")


def main(fd: int) -> None:
    torch.set_num_threads(1)  # every model on one core: the judge compares models, not thread counts
    sock = socket.socket(fileno=fd)
    server = Server()
    while True:
        try:
            msg = recv(sock)
        except EOFError:
            return
        if msg.get("op") == "bye":
            return
        try:
            reply = {"ok": True, **server.handle(msg)}
        except Exception as e:  # the student's model failed: the judge reports it as that student's error
            reply = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:500]}"}
        send(sock, reply)


if __name__ == "__main__":
    main(int(sys.argv[1]))
