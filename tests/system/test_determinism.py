"""One scenario and seed, one trace: across processes, hash seeds and clock modes.

The trace hash printed by `mastemu run` is what users compare runs by, so it
must not depend on `PYTHONHASHSEED`, on the process, or on whether the run was
paced (scaled mode) or ran flat out (virtual mode), and it must be the hash of
exactly the events stored in the run database.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from emulator.cli import main as cli
from emulator.run.events import named
from emulator.units import MIN
from store.trace import chunk_events


def mastemu() -> list[str]:
    """The installed `mastemu` script of this interpreter, else `python -m`."""
    script = Path(sys.executable).with_name("mastemu")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "emulator.cli.main"]


def test_determinism_same_seed_same_hash_in_separate_processes(
    tmp_path: Path, lease_run, read_run, hash_of
) -> None:
    """Seed 1 in two processes with different hash seeds (and in this one, in
    `lease_run`) gives one hash; seed 2 gives another."""
    runs = {"seed1-hs1": ("1", "1"), "seed1-hs2": ("1", "2"), "seed2-hs1": ("2", "1")}
    procs = {}
    for name, (seed, hash_seed) in runs.items():
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        procs[name] = subprocess.Popen(
            [*mastemu(), "run", "leader-lease", "--seed", seed, "--out", str(tmp_path / name)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    hashes = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (name, err)
        hashes[name] = hash_of(out)
    assert hashes["seed1-hs1"] == hashes["seed1-hs2"] == lease_run.trace_hash
    assert hashes["seed2-hs1"] != hashes["seed1-hs1"]
    meta_a, rows_a = read_run(tmp_path / "seed1-hs1")
    meta_b, rows_b = read_run(tmp_path / "seed1-hs2")
    assert meta_a.trace_hash == meta_b.trace_hash == hashes["seed1-hs1"]
    assert rows_a == rows_b


def test_determinism_trace_hash_is_the_hash_of_the_stored_events(lease_run, lease_trace) -> None:
    """The printed hash can be re-derived from the run database alone: it is the
    blake2b-128 of every stored event's msgpack bytes, in seq order."""
    meta, _ = lease_trace
    digest = hashlib.blake2b(digest_size=16)
    events = 0
    uri = lease_run.db.resolve().as_uri() + "?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        chunks = conn.execute("SELECT events FROM trace_chunks ORDER BY first_seq").fetchall()
    for (blob,) in chunks:
        for raw in msgspec.msgpack.decode(chunk_events(blob), type=list[msgspec.Raw]):
            digest.update(bytes(raw))
            events += 1
    assert events == meta.events
    assert digest.hexdigest() == lease_run.trace_hash


def test_determinism_virtual_and_scaled_modes_give_the_same_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, read_run, hash_of
) -> None:
    virtual, scaled = tmp_path / "virtual.db", tmp_path / "scaled.db"
    assert cli.main(["run", "leader-lease", "--until", "10m", "--out", str(virtual)]) == 0
    virtual_out = capsys.readouterr().out
    argv = ["run", "leader-lease", "--until", "10m", "--speed", "100000", "--out", str(scaled)]
    assert cli.main(argv) == 0
    scaled_out = capsys.readouterr().out
    assert hash_of(virtual_out) == hash_of(scaled_out)
    assert "max lag" in scaled_out
    assert "max lag" not in virtual_out
    meta_v, rows_v = read_run(virtual)
    meta_s, rows_s = read_run(scaled)
    assert (meta_v.mode, meta_s.mode) == ("virtual", "scaled x100000")
    assert meta_v.end_t_us == meta_s.end_t_us == 10 * MIN
    assert rows_v == rows_s


def test_determinism_until_gives_a_prefix_of_the_full_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lease_trace, read_run
) -> None:
    short = tmp_path / "short.db"
    assert cli.main(["run", "leader-lease", "--until", "10m", "--out", str(short)]) == 0
    capsys.readouterr()
    _, full_rows = lease_trace
    _, short_rows = read_run(short)
    *body, end = short_rows
    assert (end.kind, end.type, named(end).status, end.t_us) == ("run", "end", "ok", 10 * MIN)
    assert body == [r for r in full_rows if r.t_us <= 10 * MIN]
