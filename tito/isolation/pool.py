"""Run per-student grading tasks: N at once on this machine, or on a Dask distributed cluster.

`run_tasks(fn, jobs, ...)` calls `fn(job)` for each job and hands every (job, result) to
`on_done` in the calling thread, as each finishes (so the caller writes each result at once).
A task that raises is passed to `on_done` as the exception. A rich progress bar shows the tasks
done, each kind of failure `on_done` names (e.g. "tests failed 2, grading failed 1") and the time left.

    >>> run_tasks(lambda j: j * 2, [1, 2], lambda j, r: print(j, r), workers=1)
    1 2
    2 4
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Iterable

from tito.config import TitoError


def default_workers() -> int:
    """The default of --jobs: the number of CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def progress_bar(show: bool, label: str = "grading"):
    """A rich progress bar (done / total, the failures by kind, time left); None when not `show`n."""
    if not show:
        return None
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[failed]}"), TextColumn("eta"), TimeRemainingColumn(),
                    TimeElapsedColumn(), transient=False)


def tally_text(tally: dict[str, int]) -> str:
    """The failures on the bar, by kind, in the order first seen: "failed 0" when none.

    >>> tally_text({}), tally_text({"tests failed": 2, "grading failed": 1})
    ('failed 0', 'tests failed 2, grading failed 1')
    """
    return ", ".join(f"{k} {n}" for k, n in tally.items()) or "failed 0"


def run_tasks(fn: Callable[[Any], Any], jobs: Iterable[Any], on_done: Callable[[Any, Any], bool | str | None],
              workers: int = 1, scheduler: str | None = None, show_progress: bool = False,
              label: str = "grading") -> None:
    """`fn(job)` for every job: with `scheduler` (a Dask scheduler address) on that cluster, else in
    `workers` threads here (tito's tasks wait on subprocesses, so threads are enough).
    `on_done(job, result_or_exception)` returns True for a failed task, or the kind of failure in words
    ("tests failed", "grading failed"; "passed" or None: none), counted on the bar by kind."""
    jobs = list(jobs)
    if not isinstance(workers, int) or workers < 1:
        raise TitoError(f"--jobs: expected a positive number of parallel students, got {workers!r}")
    bar = progress_bar(show_progress, label)
    tally: dict[str, int] = {}
    task = None
    if bar is not None:
        bar.start()
        task = bar.add_task(label, total=len(jobs), failed=tally_text(tally))

    def done(job, res) -> None:
        kind = on_done(job, res)
        kind = "failed" if kind is True else (None if kind in (False, "passed") else kind)
        if kind:
            tally[kind] = tally.get(kind, 0) + 1
        if bar is not None:
            bar.update(task, advance=1, failed=tally_text(tally))

    try:
        if scheduler:
            _run_dask(fn, jobs, scheduler, done)
        elif workers == 1:
            for job in jobs:
                try:
                    res = fn(job)
                except Exception as e:  # noqa: BLE001 - handed to on_done as that student's failure
                    res = e
                done(job, res)
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="tito-pool") as pool:
                futures = {pool.submit(fn, job): job for job in jobs}
                for fut in as_completed(futures):
                    exc = fut.exception()
                    done(futures[fut], exc if exc is not None else fut.result())
    finally:
        if bar is not None:
            bar.stop()


def _run_dask(fn, jobs: list, address: str, done) -> None:
    try:
        from dask.distributed import Client, as_completed as dask_completed
    except ImportError as e:
        raise TitoError("--scheduler needs dask.distributed (pinned in pyproject.toml; run `python3 -m tito` "
                        "to update the environment)") from e
    try:
        client = Client(address, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise TitoError(f"--scheduler {address}: cannot reach a Dask scheduler there ({type(e).__name__}: {e}); "
                        "expected an address like tcp://host:8786") from e
    try:
        futures = {client.submit(fn, job, pure=False): job for job in jobs}
        for fut in dask_completed(list(futures), loop=client.loop):
            try:
                res = fut.result()
            except Exception as e:  # noqa: BLE001 - a worker lost or a task error: that student's failure
                res = e
            done(futures[fut], res)
    finally:
        client.close()
