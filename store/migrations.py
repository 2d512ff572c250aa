"""Schema of a run database, as numbered migrations.

`MIGRATIONS[i]` brings a database from schema version `i` to `i + 1`. The
version lives in `PRAGMA user_version`; `Store.open` applies the missing
scripts in order, each in its own transaction together with the version bump,
so a database is always at exactly one known version. A released migration is
never edited: a schema change is a new script appended to the list.

`APPLICATION_ID` is written to the file header by migration 1 so that a
SQLite file made by something else is recognised and refused.
"""

from __future__ import annotations

import msgspec

# 'mast' in ASCII: marks the file as a mastemu run database.
APPLICATION_ID = 0x6D617374

# How a run may end: "error" when an actor died on an exception of its own
# (a bug, docs/design.md §11), "failed" when the emulator itself stopped.
RUN_STATUSES = ("running", "ok", "violated", "error", "interrupted", "failed")
# Version 1's, frozen: a released script never changes.
_V1_STATUSES = ("running", "ok", "violated", "interrupted", "failed")

_V1 = f"""
PRAGMA application_id = {APPLICATION_ID};

-- One row (id = 1): what was run and how it ended.
CREATE TABLE run_meta (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    scenario_name TEXT    NOT NULL,
    scenario_text TEXT    NOT NULL DEFAULT '',
    seed          INTEGER NOT NULL,
    version       TEXT    NOT NULL DEFAULT '',
    mode          TEXT    NOT NULL DEFAULT 'virtual',
    status        TEXT    NOT NULL DEFAULT 'running'
                  CHECK (status IN ({", ".join(f"'{s}'" for s in _V1_STATUSES)})),
    trace_hash    TEXT,
    end_t_us      INTEGER,
    events        INTEGER NOT NULL DEFAULT 0,
    violations    INTEGER NOT NULL DEFAULT 0
);

-- Every kernel event, in kernel order; seq is the rowid.
CREATE TABLE trace_chunks (
    first_seq  INTEGER PRIMARY KEY,
    last_seq   INTEGER NOT NULL,
    t_first_us INTEGER NOT NULL,
    t_last_us  INTEGER NOT NULL,
    events     BLOB NOT NULL
);

CREATE TABLE metrics (
    t_us   INTEGER NOT NULL,
    name   TEXT    NOT NULL,
    labels TEXT    NOT NULL DEFAULT '{{}}',
    value  REAL    NOT NULL
);
CREATE INDEX metrics_name_t_us ON metrics (name, t_us);

-- The current lease of each role (emulated leader election).
CREATE TABLE leases (
    role          TEXT    PRIMARY KEY,
    holder        TEXT    NOT NULL,
    epoch         INTEGER NOT NULL CHECK (epoch >= 1),
    expires_at_us INTEGER NOT NULL
);

-- One row per epoch ever granted: the key makes two holders of one epoch
-- impossible, whatever the code above it does.
CREATE TABLE lease_history (
    role          TEXT    NOT NULL,
    epoch         INTEGER NOT NULL,
    holder        TEXT    NOT NULL,
    granted_at_us INTEGER NOT NULL,
    PRIMARY KEY (role, epoch)
);

-- Writes accepted under a lease (fenced effects).
CREATE TABLE lease_effects (
    id      INTEGER PRIMARY KEY,
    role    TEXT    NOT NULL,
    epoch   INTEGER NOT NULL,
    holder  TEXT    NOT NULL,
    t_us    INTEGER NOT NULL,
    payload BLOB
);

-- Typed actor state (msgpack-encoded Structs) for recovery after a crash.
CREATE TABLE kv (
    namespace TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     BLOB NOT NULL,
    PRIMARY KEY (namespace, key)
);

CREATE TABLE violations (
    id        INTEGER PRIMARY KEY,
    seq       INTEGER,
    t_us      INTEGER NOT NULL,
    invariant TEXT    NOT NULL,
    message   TEXT    NOT NULL
);
"""

# Which schema parts a database holds, and at which version (see SchemaPart).
_V2 = """
CREATE TABLE schema_parts (
    name    TEXT    PRIMARY KEY,
    version INTEGER NOT NULL CHECK (version >= 0)
);
"""

# A run may end in "error"; it remembers how far it was asked to run
# (`until_us`, for `resume`) and how many actors died on exceptions.
_V3 = f"""
CREATE TABLE run_meta_v3 (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    scenario_name TEXT    NOT NULL,
    scenario_text TEXT    NOT NULL DEFAULT '',
    seed          INTEGER NOT NULL,
    version       TEXT    NOT NULL DEFAULT '',
    mode          TEXT    NOT NULL DEFAULT 'virtual',
    status        TEXT    NOT NULL DEFAULT 'running'
                  CHECK (status IN ({", ".join(f"'{s}'" for s in RUN_STATUSES)})),
    trace_hash    TEXT,
    end_t_us      INTEGER,
    events        INTEGER NOT NULL DEFAULT 0,
    violations    INTEGER NOT NULL DEFAULT 0,
    actor_errors  INTEGER NOT NULL DEFAULT 0,
    until_us      INTEGER
);
INSERT INTO run_meta_v3 (id, scenario_name, scenario_text, seed, version, mode, status,
                         trace_hash, end_t_us, events, violations)
    SELECT id, scenario_name, scenario_text, seed, version, mode, status,
           trace_hash, end_t_us, events, violations FROM run_meta;
DROP TABLE run_meta;
ALTER TABLE run_meta_v3 RENAME TO run_meta;
"""

# A trace that keeps only some events (`[trace] level = "decisions"`): a chunk
# then lists its events' seqs (msgpack array); NULL means consecutive.
_V4 = """
ALTER TABLE trace_chunks ADD COLUMN seqs BLOB;
"""

# Each trace chunk's digest chains it to the chunks before it (blake2b of the
# previous chunk's digest, its seq range and its stored bytes): a chunk
# changed, lost or reordered after the fact shows (`store/verify.py`). NULL in
# chunks written before, whose runs are checked without it.
_V5 = """
ALTER TABLE trace_chunks ADD COLUMN digest BLOB;
"""

MIGRATIONS: list[str] = [_V1, _V2, _V3, _V4, _V5]

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaPart(msgspec.Struct, frozen=True):
    """The tables of one emulated system, versioned on their own.

    The run database's own tables (metadata, trace, metrics, leases, kv,
    violations) are `MIGRATIONS`, numbered by `PRAGMA user_version`. A
    system's tables (MAST's shared database: `store/mast/schema.py`) form a
    part with its own migration list, applied after them and numbered in the
    `schema_parts` table, so the run database never needs to know them. The
    same rule holds for a part: a released script is never edited.
    """

    name: str
    migrations: tuple[str, ...]


# Databases written before parts existed numbered MAST's three scripts 2-4
# after the run database's first: such a file holds (uv - 1) MAST scripts.
LEGACY_PART = "mast"
