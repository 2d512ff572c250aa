"""Where a campaign's runs execute: local processes, or the workers of a Dask cluster.

`--cluster` names a Dask cluster: `local` or `local:N` starts one on this
machine (N worker processes, one thread each), `tcp://HOST:PORT` (or
`tls://…`) connects to a running scheduler, so a campaign also runs on
whatever Dask deploys on (Slurm, Kubernetes, cloud VMs). Without it a
campaign uses a pool of local processes, as before.

A run on a Dask worker is the same run as anywhere else: the worker gets the
scenario's text (or the built-in scenario's name, which every install
resolves to the same file) and the seed, and the trace hash depends on
nothing else. What comes back is the seed's outcome and, for a failing run
only, the bytes of its database, which the caller writes where a local
sweep would have kept it (a worker's disk is not the caller's).

Dask is an optional dependency (`pip install "mast-emulator[cluster]"`); a
campaign without `--cluster` never imports it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import re
import signal
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.errors import InputError

WORKERS_MAX = 1024
# How long to wait for a remote scheduler before saying it cannot be reached.
CONNECT_TIMEOUT_S = 10
_ADDRESS = re.compile(r"^(tcp|tls|ws|wss)://[^\s/]+$")
# Files of a run database that a failing run ships back.
DB_SUFFIXES = ("", "-wal")


@dataclass(frozen=True)
class ClusterSpec:
    """A Dask cluster to run on: a scheduler's address, or a local one of `workers`."""

    address: str | None = None
    workers: int | None = None

    def describe(self) -> str:
        if self.address is not None:
            return self.address
        return "local" if self.workers is None else f"local:{self.workers}"


def parse_cluster(text: str) -> ClusterSpec:
    """`local`, `local:N` or a scheduler address; InputError says what is wrong."""
    if text == "local":
        return ClusterSpec()
    if text.startswith("local:"):
        count = text.removeprefix("local:")
        if not count.isdigit() or not 1 <= int(count) <= WORKERS_MAX:
            raise InputError(
                "--cluster", "", f"local:N needs N between 1 and {WORKERS_MAX}, not {count!r}"
            )
        return ClusterSpec(workers=int(count))
    if _ADDRESS.match(text):
        return ClusterSpec(address=text)
    raise InputError(
        "--cluster",
        "",
        f"{text!r} is not `local`, `local:N` or a Dask scheduler address (tcp://HOST:PORT)",
    )


@dataclass(frozen=True)
class DaskPool:
    """An open Dask cluster: a concurrent.futures executor and how many runs fit at once."""

    executor: Executor
    slots: int


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise InputError(
            "--cluster", "", 'needs Dask: pip install "mast-emulator[cluster]" (dask[distributed])'
        ) from None
    return distributed


@contextlib.contextmanager
def dask_pool(spec: ClusterSpec, jobs: int | None) -> Iterator[DaskPool]:
    """Connect to (or start) the cluster of `spec`; close what was opened on the way out.

    `jobs`, when given, caps the runs in flight; otherwise every worker thread
    of the cluster gets one.
    """
    distributed = _distributed()
    import dask

    with contextlib.ExitStack() as stack:
        if spec.address is None:
            workers = spec.workers or jobs or multiprocessing.cpu_count()
            # Fork where there is fork, as the local pool does: workers then know
            # what this process registered (plugins, systems a test added).
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            stack.enter_context(
                dask.config.set({"distributed.worker.multiprocessing-method": method})
            )
            cluster = stack.enter_context(
                distributed.LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            )
            client = stack.enter_context(distributed.Client(cluster))
        else:
            try:
                client = stack.enter_context(
                    distributed.Client(spec.address, timeout=f"{CONNECT_TIMEOUT_S}s")
                )
            except (OSError, TimeoutError) as error:
                raise InputError(
                    "--cluster", "", f"cannot reach the Dask scheduler at {spec.address}: {error}"
                ) from None
        threads = sum(client.nthreads().values()) or 1
        slots = min(jobs, threads) if jobs else threads
        executor = client.get_executor(pure=False)
        yield DaskPool(executor=executor, slots=slots)


def _fork_context() -> Any:
    """Fork where there is fork: workers then inherit what was registered in-process
    (plugins, systems a test registered) and start without importing everything again."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


@contextlib.contextmanager
def process_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """Local worker processes for a campaign's runs; an interrupt ends the runs in flight.

    A terminal's Ctrl-C reaches the workers as well, but a SIGINT sent to this
    process alone (`kill -INT`, a job scheduler, a test) does not: the pool
    would wait for every run in flight to reach its end. Those runs' results
    would be thrown away, so their workers are ended at once.
    """
    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=_fork_context(),
        initializer=_end_with_parent,
        initargs=(os.getpid(),),
    )
    try:
        yield pool
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        for child in multiprocessing.active_children():
            child.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


_PR_SET_PDEATHSIG = 1


def _end_with_parent(parent: int) -> None:
    """A pool worker ends when the process that started it does, even one killed outright.

    Otherwise a worker of a campaign killed with SIGKILL would run its seed to the end (a
    day-long run: minutes of a core) for nobody. Linux only: elsewhere a worker outlives
    its parent by the rest of its run, then finds its queue gone and stops.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


# ---- what travels to a worker and back ------------------------------------------
@dataclass(frozen=True)
class ScenarioRef:
    """A scenario as a worker gets it: a built-in name, or a file's text and path.

    The path is kept for what the scenario names relative to itself (a trace
    file): a worker reads those at the same path, so they must be on a file
    system the workers share.
    """

    ref: str
    text: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class Shipped:
    """A seed's outcome from a worker, with its database's files if it is kept."""

    outcome: Any  # a SeedRun; Any keeps this module free of the sweep's types
    files: dict[str, bytes]


def ship_db(db: Path) -> dict[str, bytes]:
    """A closed run database's files by suffix (the WAL only if one was left)."""
    files: dict[str, bytes] = {}
    for suffix in DB_SUFFIXES:
        path = Path(str(db) + suffix)
        if path.exists():
            files[suffix] = path.read_bytes()
    return files


def land_db(files: dict[str, bytes], folder: Path, name: str) -> Path:
    """Write shipped database files into `folder` under `name`; returns the database path."""
    db = folder / name
    for suffix, data in files.items():
        Path(str(db) + suffix).write_bytes(data)
    return db


def worker_tempdir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="mastemu-worker-")
