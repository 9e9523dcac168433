"""tito.testing.kernels: notebook kernels forked from a server that imported torch once. What a kernel nbclient
starts itself has, this one has too: the notebook's folder, the caller's environment, `__main__`, fresh random
seeds, an interrupt that stops a cell, an end with its notebook and an end with the process that asked for it."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from busy import ended
from tito.testing.kernels import KernelServer


@pytest.fixture(scope="module")
def server():
    # torch's compile-cache helper as the default preload has it (torch._inductor.codecache loads it)
    with KernelServer(preload=["numpy", "torch", "torch._inductor.runtime.cache_dir_utils", "ipykernel.kernelapp"]) as s:
        yield s


def _notebook(*cells: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def _out(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_a_forked_kernel_runs_a_notebook_as_a_fresh_one_would(server, tmp_path, monkeypatch):
    """The same notebook in nbclient's own python3 kernel and in two forked ones: the same path, folder, environment,
    `__name__` and matplotlib backend; torch already there in the forked ones, each seeded afresh, each gone after."""
    monkeypatch.setenv("TITO_KERNEL_PROBE", "from the caller")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    (tmp_path / "data.txt").write_text("beside the notebook")
    cells = ("import os, sys, random, numpy as np\nprint('torch' in sys.modules, os.getppid() == int(os.environ['TEST_PID']))",
             "import json, matplotlib\n"
             "print(json.dumps([sys.path, os.getcwd(), os.environ['TITO_KERNEL_PROBE'], open('data.txt').read(), __name__,\n"
             "                  matplotlib.get_backend()]))",
             "import tempfile\nprint(os.getpid(), random.random(), np.random.rand(), tempfile.mkdtemp())",
             "x = 41\nx + 1",
             "from torch._inductor.runtime.cache_dir_utils import cache_dir\nprint(cache_dir())")
    monkeypatch.setenv("TEST_PID", str(os.getpid()))
    runs = []
    for how in ({"kernel_name": "python3"}, server.client_args(), server.client_args()):
        nb = _notebook(*cells)
        NotebookClient(nb, timeout=60, resources={"metadata": {"path": str(tmp_path)}}, **how).execute()
        runs.append(nb)
    fresh, *forked = runs
    assert _out(fresh.cells[0]).split() == ["False", "True"], "nbclient's own kernel: torch not loaded, our child"
    for nb in forked:
        assert _out(nb.cells[0]).split() == ["True", "False"], "forked: torch loaded, the server's child"
        assert _out(nb.cells[1]) == _out(fresh.cells[1]), (_out(nb.cells[1]), _out(fresh.cells[1]))
        assert nb.cells[3].outputs[0]["data"]["text/plain"] == "42"
        # torch's compile cache where a fresh kernel keeps it (under the caller's temporary folder, kept between
        # runs), not in the kernel's own temporary folder, removed when it ends
        assert _out(nb.cells[4]) == _out(fresh.cells[4]), (_out(nb.cells[4]), _out(fresh.cells[4]))
    assert "from the caller" in _out(fresh.cells[1]) and "inline" in _out(fresh.cells[1])
    pids, seeds = zip(*[(int(_out(r.cells[2]).split()[0]), _out(r.cells[2]).split()[1:3]) for r in forked])
    assert seeds[0][0] != seeds[1][0] and seeds[0][1] != seeds[1][1], ("random and numpy seeded afresh", seeds)
    assert all(ended(pid) for pid in pids), "each kernel ends with its notebook"
    made = [Path(_out(r.cells[2]).split()[3]) for r in forked]
    deadline = time.monotonic() + 10  # the server removes a kernel's temporary folder as it collects its end
    while any(m.exists() for m in made) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(m.exists() for m in made), f"a kernel's temporary files go with it: {made}"


def test_an_interrupt_stops_a_cell_and_the_kernel_goes_on(server, tmp_path):
    """nbclient interrupts a cell at its timeout (SIGINT to the proxy's group, passed on to the kernel): the cell
    ends in KeyboardInterrupt within seconds, not after its minute, and the kernel answers the shutdown."""
    from nbclient.exceptions import CellExecutionError

    nb = _notebook("import time\nfor _ in range(600):\n    time.sleep(0.1)", "y = 1")
    client = NotebookClient(nb, timeout=3, interrupt_on_timeout=True, resources={"metadata": {"path": str(tmp_path)}},
                            **server.client_args())
    t0 = time.monotonic()
    with pytest.raises(CellExecutionError, match="KeyboardInterrupt"):
        client.execute()
    assert time.monotonic() - t0 < 30


def test_the_kernel_ends_when_the_process_that_asked_for_it_is_killed(server, tmp_path):
    """jupyter_client kills a kernel by its process group: here that is the proxy's; the server sees the proxy's
    socket close and kills the kernel it forked."""
    from jupyter_client.utils import run_sync

    args = server.client_args()
    km = args["kernel_manager_class"](kernel_name=args["kernel_name"])
    run_sync(km.start_kernel)(cwd=str(tmp_path))
    said: list[str] = []
    kc = km.blocking_client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        reply = kc.execute_interactive("import os; print(os.getpid())", timeout=30,
                                       output_hook=lambda msg: said.append(msg["content"].get("text", "")))
    finally:
        kc.stop_channels()
    assert reply["content"]["status"] == "ok"
    kernel_pid, proxy_pid = int("".join(said).split()[0]), km.provisioner.process.pid
    assert kernel_pid != proxy_pid
    os.kill(proxy_pid, signal.SIGKILL)
    assert ended(kernel_pid), "the kernel outlived the proxy killed under it"
    run_sync(km.shutdown_kernel)(now=True)
