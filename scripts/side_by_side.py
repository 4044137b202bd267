"""An experiment's independent runs side by side: ``--jobs`` at a time, with a progress bar over the runs.

Every run of an experiment is independent of the others (its own seed, its own process or subprocess), so
they can run at the same time. On a machine of C cores, ``--jobs N`` runs N at a time, each on C // N torch
threads (OMP_NUM_THREADS, unless it is set already): a run's figures depend only on its settings and its
thread count, so ``--jobs 2`` on 2 cores gives exactly the figures of ``OMP_NUM_THREADS=1 --jobs 1``
(tests/test_scripts.py checks it bit for bit), in about half the time. Wall times differ, of course.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import torch


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the system says it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def threads_told() -> int | None:
    """OMP_NUM_THREADS when it is set to a positive number, else None."""
    told = os.environ.get("OMP_NUM_THREADS", "")
    return int(told) if told.isdigit() and int(told) > 0 else None


def pin_threads(jobs: int) -> int:
    """Torch threads for each of ``jobs`` runs at a time: OMP_NUM_THREADS when it is set, else the cores shared out
    (at least 1). Set in this process and in the environment, which every run started from here inherits."""
    threads = threads_told() or max(1, usable_cores() // max(1, jobs))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    return threads


class RunFailed(Exception):
    """A run of an experiment stopped: ``line`` is its script's one-line error, ``code`` its exit code."""

    def __init__(self, line: str, code: int) -> None:
        super().__init__(line, code)
        self.line, self.code = line, code


def worker_processes(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` fresh Python processes (spawned, not forked: the parent's torch threads do not survive a fork),
    each with the parent's OMP_NUM_THREADS (:func:`pin_threads` set it in the environment)."""
    return ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("spawn"), initializer=_threads)


def _threads() -> None:
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))


def _where(fn: Callable) -> tuple[str, str]:
    """(module, name) of ``fn`` that a worker process imports: a script run as ``__main__`` by its file's name
    (scripts/ is on the workers' sys.path, as on this process's)."""
    module = fn.__module__
    if module in ("__main__", "__mp_main__"):
        module = Path(sys.modules[module].__file__).stem
    return module, fn.__qualname__


def _call(where: tuple[str, str], *args: Any) -> Any:
    return getattr(importlib.import_module(where[0]), where[1])(*args)


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} minutes" if seconds >= 90 else f"{seconds:.0f} seconds"


def run_all(
    name: str,
    calls: Sequence[tuple[str, Callable, tuple]],
    jobs: int,
    seconds_each: float,
    line: Callable[[Any], str] = lambda _: "",
    processes: bool = True,
) -> list:
    """Run ``calls`` -- (label, function, args) -- ``jobs`` at a time and return their results in the order of
    ``calls``. In worker processes with ``processes`` (a run that computes in Python: a function defined at the top
    of a module, and picklable arguments and result), in threads otherwise (each run a subprocess of its own).
    Prints the expected total up front (``seconds_each``: one run's seconds on our 2-core machine at one thread,
    beside another), then a progress bar over the runs with the time left, and ``label: line(result)`` as each
    run ends. A :class:`RunFailed` of any run stops the others that have not started, and is raised."""
    from tqdm.auto import tqdm

    jobs = max(1, min(jobs, len(calls)))
    expected = seconds_each * len(calls) / jobs
    threads = os.environ.get("OMP_NUM_THREADS", str(torch.get_num_threads()))
    print(
        f"{name}: {len(calls)} runs, {jobs} at a time, {threads} thread{'s' * (threads != '1')} each: about "
        f"{minutes(expected)} on our 2-core machine (--jobs sets how many at a time)",
        file=sys.stderr,
        flush=True,
    )
    results: list = [None] * len(calls)
    start = time.perf_counter()
    bar = tqdm(total=len(calls), desc=name, unit="run", file=sys.stderr, dynamic_ncols=True)

    def finished(i: int, result: Any) -> None:
        results[i] = result
        said = line(result)
        bar.write(f"{calls[i][0]}{': ' + said if said else ''}", file=sys.stderr)
        bar.update(1)

    try:
        if jobs == 1:  # in this process, one after the other: no worker to start
            for i, (_, fn, args) in enumerate(calls):
                finished(i, fn(*args))
        else:
            with worker_processes(jobs) if processes else ThreadPoolExecutor(jobs) as pool:
                futures = {
                    pool.submit(_call, _where(fn), *args) if processes else pool.submit(fn, *args): i
                    for i, (_, fn, args) in enumerate(calls)
                }
                for future in as_completed(futures):
                    try:
                        finished(futures[future], future.result())
                    except BaseException:
                        pool.shutdown(wait=False, cancel_futures=True)  # the runs not started yet do not start
                        raise
    finally:
        bar.close()
    print(f"{name}: {len(calls)} runs in {minutes(time.perf_counter() - start)}", file=sys.stderr, flush=True)
    return results
