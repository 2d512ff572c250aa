"""One run database, one writer: an exclusive lock held for a run's whole life.

Two processes writing one run database lose a run (the second replaces the
first, or their events interleave), and SQLite's own locks last a
transaction, not a run. So a run (`mastemu run`, `resume`) takes an
exclusive `flock` on a lock file beside its database, `RUN.db-lock`, before
it touches the database and keeps it until the database is closed. The file
says who holds it (pid and command line) so that the process refused can
name the holder. The kernel drops the lock when its holder dies, however it
dies: a SIGKILLed run leaves no stale lock, only perhaps the file, which
says nothing once nobody holds its lock.

The holder removes the file when it lets go. A process that opened the file
just before that could then lock a file no longer in the folder while a
third creates a new one, so a lock counts only if the path still names the
very file locked; otherwise the taker tries again.

Readers (`report`, `check`…) do not lock: SQLite's WAL lets them read a run
in progress. They ask `holder` whether a run is in progress, to tell a
database being written from one a killed process left.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from store.db import StoreError

LOCK_SUFFIX = "-lock"
# A reader's probe holds a shared lock for an instant: a writer retries this long.
_RETRY_S = 0.5
# Locks this process holds, by lock file: (descriptor, depth), so that a run may
# nest (a resume that starts its run over holds its database once).
_HELD: dict[str, tuple[int, int]] = {}


@dataclass(frozen=True)
class Holder:
    """Who holds a run database's lock."""

    pid: int | None
    command: str

    def describe(self) -> str:
        who = f"process {self.pid}" if self.pid is not None else "another process"
        return f"{who} ({self.command})" if self.command else who


class RunLocked(StoreError):
    """Another process holds the run database (`holder` names it)."""

    def __init__(self, path: Path, holder: Holder) -> None:
        self.path = path
        self.holder = holder
        super().__init__(f"{path}: in use by {holder.describe()}; wait for it or stop it first")


def lock_path(db: Path) -> Path:
    return Path(str(db) + LOCK_SUFFIX)


def _read_holder(path: Path) -> Holder:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict):
        info = {}
    pid = info.get("pid")
    return Holder(pid if isinstance(pid, int) else None, str(info.get("command", "")))


def holder(db: Path) -> Holder | None:
    """Who writes `db` now, or None if nobody does (a finished or killed run)."""
    path = lock_path(db)
    key = os.fspath(path.absolute())
    if key in _HELD:
        return Holder(os.getpid(), " ".join(sys.argv))
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _take(path: Path) -> int | None:
    """A descriptor of `path` holding its exclusive lock, or None if someone holds it."""
    deadline = time.monotonic() + _RETRY_S
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
            continue
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed it as we opened it: take the new one


@contextlib.contextmanager
def run_lock(db: Path, command: str | None = None) -> Iterator[None]:
    """Hold `db`'s lock for the block; RunLocked (naming the holder) if another process has it.

    Reentrant within a process. `command` is what the holder says it runs
    (default: this process's command line).
    """
    path = lock_path(db)
    key = os.fspath(path.absolute())
    if key in _HELD:
        fd, depth = _HELD[key]
        _HELD[key] = (fd, depth + 1)
        try:
            yield
        finally:
            fd, depth = _HELD[key]
            _HELD[key] = (fd, depth - 1)
        return
    try:
        fd = _take(path)
    except OSError as error:
        raise StoreError(f"{db}: cannot lock: {error.strerror or error}") from None
    if fd is None:
        raise RunLocked(db, _read_holder(path))
    info = {"pid": os.getpid(), "command": command or " ".join(sys.argv)}
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps(info).encode())
    _HELD[key] = (fd, 1)
    try:
        yield
    finally:
        del _HELD[key]
        # Unlink first: whoever opens the path afterwards makes a new file.
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)
