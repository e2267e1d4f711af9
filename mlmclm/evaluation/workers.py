"""Running a fine-tuning grid's jobs, each a (training task, evaluated tasks, lr, seed) tuple: one after another in
this process, or on `grid_workers` forked processes with an equal share of the torch threads each, under one progress
bar. A job is the same computation either way, so the results are the same. A forked worker gets the function that
runs a job from its initializer and inherits the data it reads (fork copies the parent's memory); it ends with its
parent, however the parent ends, and a failure stops the grid (the results already written stay).
"""

from __future__ import annotations

import os
import sys
from typing import Callable

import torch

from ..config import FinetuneConfig
from ..io import lr_text


def grid_workers(cfg: FinetuneConfig, device: torch.device) -> int:
    """Processes a grid runs on: `cfg.grid_workers`, or with 0 one a torch thread (one a core unless the thread
    count was lowered, e.g. by OMP_NUM_THREADS). Always 1 on a GPU and off Linux (workers are forked)."""
    if device.type != "cpu" or sys.platform != "linux":
        return 1
    return cfg.grid_workers or torch.get_num_threads()


def run_jobs(run: Callable[[tuple], None], jobs: list[tuple], workers: int, progress: bool, name: str) -> None:
    """`run(job)` for each of `jobs`, one after another here or on `workers` forked processes, with a progress bar
    named `name`."""
    from tqdm.auto import tqdm

    bar = tqdm(total=len(jobs), desc=name, unit="run", disable=not progress)
    if workers > 1:
        bar.set_postfix_str(f"{workers} workers")
        _run_in_workers(run, jobs, workers, bar)
    else:
        for job in jobs:
            bar.set_postfix_str(f"{job[0].name} lr={lr_text(job[2])} seed={job[3]}")
            run(job)
            bar.update()
    bar.close()


_RUN: Callable[[tuple], None] | None = None  # in a forked worker only: the `run` its initializer was given


def _worker_init(run: Callable[[tuple], None], threads: int, parent: int) -> None:
    """A forked worker keeps `run` for its jobs, ends with its parent however the parent ends (Linux: SIGTERM on the
    parent's death), leaves Ctrl-C to the parent, and runs on its share of the torch threads."""
    import ctypes
    import signal

    global _RUN
    _RUN = run
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before that
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads)


def _run_job(job: tuple) -> None:
    _RUN(job)


def _run_in_workers(run: Callable[[tuple], None], jobs: list[tuple], workers: int, bar) -> None:
    """The jobs on `workers` forked processes with an equal share of the torch threads each (at least one); each
    worker is given `run` by its initializer (not pickled: a forked process inherits it, and the data it reads)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    threads = max(1, torch.get_num_threads() // workers)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the fast tokenizer's threads do not survive a fork
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_init, initargs=(run, threads, os.getpid()))
    try:
        futures = {pool.submit(_run_job, job): job for job in jobs}
        for future in as_completed(futures):
            future.result()
            bar.update()
    except BaseException:
        for worker in list((getattr(pool, "_processes", None) or {}).values()):  # the running jobs end now too
            worker.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
