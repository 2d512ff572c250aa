"""MAST's shared database: its tables, as a schema part of the run database.

Tenants, the global queue and its auctions, machines and dynamic clusters,
jobs and allocations, the data catalog and replicas (script 1); an index the
schedulers' live-job reads need (2); the slow path's regions, copies, daily
byte counts and Tetris passes (3). The run database applies them after its
own tables (`store/migrations.py`, `SchemaPart`).
"""

from __future__ import annotations

from store.migrations import SchemaPart


# The queue's table, by name and ended states: created by version 1, re-created
# with one more ended state by version 7 (the rest of its columns are the same).
def _workloads_table(name: str, ended: str) -> str:
    return f"""\
CREATE TABLE {name} (
    id            TEXT PRIMARY KEY,
    tenant        TEXT    NOT NULL,
    spec          BLOB    NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN ('PENDING', 'WAITING', 'WAITING_DATA',
                      'DISPATCHING', 'RUNNING', {ended})),
    submitted_us  INTEGER NOT NULL,
    queued_us     INTEGER NOT NULL,
    priority      INTEGER NOT NULL,
    credit        REAL    NOT NULL DEFAULT 0,
    within_quota  INTEGER NOT NULL DEFAULT 0,
    region        TEXT,
    auction_id    INTEGER,
    gms_epoch     INTEGER,
    attempts      INTEGER NOT NULL DEFAULT 0,
    preemptions   INTEGER NOT NULL DEFAULT 0,
    started_us    INTEGER,
    finished_us   INTEGER,
    version       INTEGER NOT NULL DEFAULT 0
);
"""


_WORKLOAD_COLUMNS = (
    "id, tenant, spec, state, submitted_us, queued_us, priority, credit, within_quota, region, "
    "auction_id, gms_epoch, attempts, preemptions, started_us, finished_us, version"
)


# MAST's shared replicated database: the global job queue, the fleet, the
# data catalog. Specs are msgpack-encoded records (store/mast/records.py); columns
# hold what queries filter or sort on.
_M1 = (
    """
CREATE TABLE tenants (
    name       TEXT PRIMARY KEY,
    priority   INTEGER NOT NULL,
    gpu_quota  INTEGER NOT NULL,
    cpu_quota  INTEGER NOT NULL
);

-- The global job queue. `state` is the workload's one state at any time
-- (invariant 8); `version` is bumped by every change, for compare-and-set.
"""
    + _workloads_table("workloads", "'DONE', 'FAILED'")
    + """CREATE INDEX workloads_state ON workloads (state);

CREATE TABLE auctions (
    id          INTEGER PRIMARY KEY,
    workload_id TEXT    NOT NULL,
    gms_epoch   INTEGER NOT NULL,
    opened_us   INTEGER NOT NULL,
    closed_us   INTEGER,
    outcome     TEXT,
    winner      TEXT
);

CREATE TABLE clusters (
    id        TEXT PRIMARY KEY,
    region    TEXT    NOT NULL,
    ml        INTEGER NOT NULL,
    intended  INTEGER NOT NULL
);

CREATE TABLE machines (
    host          TEXT PRIMARY KEY,
    region        TEXT    NOT NULL,
    rack          TEXT    NOT NULL,
    fault_domain  TEXT    NOT NULL,
    gpu_type      TEXT,
    gpus          INTEGER NOT NULL,
    cpu_cores     INTEGER NOT NULL,
    memory_gb     INTEGER NOT NULL,
    cluster       TEXT,
    healthy       INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX machines_cluster ON machines (cluster);

-- A job placed in a cluster: its attempt, state and saved progress.
CREATE TABLE jobs (
    workload_id    TEXT    NOT NULL,
    job            TEXT    NOT NULL,
    cluster        TEXT,
    attempt        INTEGER NOT NULL DEFAULT 0,
    state          TEXT    NOT NULL,
    priority       INTEGER NOT NULL,
    checkpoint_us  INTEGER NOT NULL DEFAULT 0,
    started_us     INTEGER,
    cm_epoch       INTEGER,
    PRIMARY KEY (workload_id, job)
);

-- Which job holds how many GPUs (or the whole CPU machine) on which host.
CREATE TABLE allocations (
    host        TEXT    NOT NULL,
    workload_id TEXT    NOT NULL,
    job         TEXT    NOT NULL,
    gpus        INTEGER NOT NULL,
    cpu         INTEGER NOT NULL,
    since_us    INTEGER NOT NULL,
    PRIMARY KEY (host, workload_id, job)
);
CREATE INDEX allocations_job ON allocations (workload_id, job);

CREATE TABLE data_tables (
    name        TEXT PRIMARY KEY,
    size_bytes  INTEGER NOT NULL,
    home_region TEXT    NOT NULL
);

CREATE TABLE replicas (
    table_name TEXT    NOT NULL,
    region     TEXT    NOT NULL,
    state      TEXT    NOT NULL CHECK (state IN ('copying', 'ready')),
    ready_us   INTEGER,
    PRIMARY KEY (table_name, region)
);
"""
)

# The schedulers read a cluster's live jobs at every scan (RMS and CM views);
# without this, each such read scans every job ever placed.
_M2 = """
CREATE INDEX jobs_cluster_state ON jobs (cluster, state);
"""

# The slow path: region storage, the migration service's copies and daily byte
# counts, Tetris's passes, and a replica's freshness lag.
_M3 = """
CREATE TABLE regions (
    name          TEXT PRIMARY KEY,
    storage_bytes INTEGER NOT NULL
);

ALTER TABLE replicas ADD COLUMN lag_s REAL NOT NULL DEFAULT 0;

-- A cross-region copy of a table, ordered by Tetris or on demand by the GMS.
-- bytes_done is the persisted progress: a restarted service resumes from it.
CREATE TABLE copies (
    id          INTEGER PRIMARY KEY,
    table_name  TEXT    NOT NULL,
    src         TEXT    NOT NULL,
    dst         TEXT    NOT NULL,
    size_bytes  INTEGER NOT NULL,
    bytes_done  INTEGER NOT NULL DEFAULT 0,
    priority    INTEGER NOT NULL,
    deadline_us INTEGER,
    created_us  INTEGER NOT NULL,
    reason      TEXT    NOT NULL,
    workload_id TEXT,
    state       TEXT    NOT NULL CHECK (state IN ('queued', 'copying', 'done', 'cancelled')),
    finished_us INTEGER
);
-- At most one live copy of a table into a region.
CREATE UNIQUE INDEX copies_live ON copies (table_name, dst)
    WHERE state IN ('queued', 'copying');
CREATE INDEX copies_state ON copies (state);

-- Bytes the migration service moved per emulated day (the daily cap).
CREATE TABLE migration_days (
    day   INTEGER PRIMARY KEY,
    bytes INTEGER NOT NULL
);

-- One Tetris pass: what it planned.
CREATE TABLE tetris_passes (
    id            INTEGER PRIMARY KEY,
    t_us          INTEGER NOT NULL,
    version       TEXT    NOT NULL,
    cost_before   REAL    NOT NULL,
    cost_after    REAL    NOT NULL,
    moves         INTEGER NOT NULL,
    replicas      INTEGER NOT NULL,
    bytes_planned INTEGER NOT NULL
);
"""


# The change log's triggers that read `machines` or `allocations`: written once,
# used where they are made (`_M4`, `_M5`) and made again (`_M6`).
_ALLOC_UPDATE_TRIGGER = """\
CREATE TRIGGER fleet_alloc_update AFTER UPDATE ON allocations BEGIN
    UPDATE fleet_seq SET n = n + 1;
    INSERT INTO fleet_changes (cluster, host, workload_id, job, seq)
        SELECT m.cluster, '', a.workload_id, a.job, (SELECT n FROM fleet_seq)
        FROM (SELECT OLD.host AS host, OLD.workload_id AS workload_id, OLD.job AS job
              UNION SELECT NEW.host, NEW.workload_id, NEW.job) AS a
        JOIN machines m ON m.host = a.host WHERE m.cluster IS NOT NULL
        ON CONFLICT DO UPDATE SET seq = excluded.seq;
END;
"""
_MACHINE_UPDATE_TRIGGER = """\
CREATE TRIGGER fleet_machine_update AFTER UPDATE OF cluster, healthy ON machines BEGIN
    UPDATE fleet_seq SET n = n + 1;
    INSERT INTO fleet_changes (cluster, host, workload_id, job, seq)
        SELECT c, NEW.host, '', '', (SELECT n FROM fleet_seq)
        FROM (SELECT OLD.cluster AS c UNION SELECT NEW.cluster) WHERE c IS NOT NULL
        ON CONFLICT DO UPDATE SET seq = excluded.seq;
END;
"""
# As `_M5` made it: quiet while a release logs its own changes (`fleet.release_job`).
_ALLOC_DELETE_TRIGGER = """\
CREATE TRIGGER fleet_alloc_delete AFTER DELETE ON allocations
WHEN (SELECT quiet FROM fleet_seq) = 0 BEGIN
    UPDATE fleet_seq SET n = n + 1;
    INSERT INTO fleet_changes (cluster, host, workload_id, job, seq)
        SELECT cluster, '', OLD.workload_id, OLD.job, (SELECT n FROM fleet_seq)
        FROM machines WHERE host = OLD.host AND cluster IS NOT NULL
        ON CONFLICT DO UPDATE SET seq = excluded.seq;
END;
"""


# Each cluster's changes in order, for schedulers that keep a working copy of
# it (`ClusterLedger.sync`): a job whose row or allocations changed (`host`
# empty), or a machine whose row changed (`workload_id` and `job` empty). One
# row per (cluster, host, workload, job) holding the sequence number of its
# latest change (`fleet_seq`), so the rows of a cluster with a larger one
# than a reader's last are exactly what changed since it read. Allocations are
# logged per job, not per machine: a job's start writes one row per machine it
# takes (a hundred CPU machines is common) but logs one change. Allocations
# are inserted only with their job's row (`fleet.start_job`, one transaction),
# whose trigger logs the change: a trigger per inserted row cost a day of
# meta-day half a minute. Deletes and updates of allocations log their own.
_M4 = (
    """
CREATE TABLE fleet_seq (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
INSERT INTO fleet_seq VALUES (1, 0);

CREATE TABLE fleet_changes (
    cluster     TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    workload_id TEXT    NOT NULL,
    job         TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    PRIMARY KEY (cluster, host, workload_id, job)
) WITHOUT ROWID;
CREATE INDEX fleet_changes_seq ON fleet_changes (cluster, seq);

CREATE TRIGGER fleet_alloc_delete AFTER DELETE ON allocations BEGIN
    UPDATE fleet_seq SET n = n + 1;
    INSERT INTO fleet_changes (cluster, host, workload_id, job, seq)
        SELECT cluster, '', OLD.workload_id, OLD.job, (SELECT n FROM fleet_seq)
        FROM machines WHERE host = OLD.host AND cluster IS NOT NULL
        ON CONFLICT DO UPDATE SET seq = excluded.seq;
END;
"""
    + _ALLOC_UPDATE_TRIGGER
    + """"""
    + _MACHINE_UPDATE_TRIGGER
    + """CREATE TRIGGER fleet_job_insert AFTER INSERT ON jobs WHEN NEW.cluster IS NOT NULL BEGIN
    UPDATE fleet_seq SET n = n + 1;
    INSERT INTO fleet_changes (cluster, host, workload_id, job, seq)
        VALUES (NEW.cluster, '', NEW.workload_id, NEW.job, (SELECT n FROM fleet_seq))
        ON CONFLICT DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER fleet_job_update AFTER UPDATE OF cluster, state, priority, started_us ON jobs
BEGIN
    UPDATE fleet_seq SET n = n + 1;
    INSERT INTO fleet_changes (cluster, host, workload_id, job, seq)
        SELECT c, '', NEW.workload_id, NEW.job, (SELECT n FROM fleet_seq)
        FROM (SELECT OLD.cluster AS c UNION SELECT NEW.cluster) WHERE c IS NOT NULL
        ON CONFLICT DO UPDATE SET seq = excluded.seq;
END;
"""
)

# Every RMS reads its region's ready replicas at every scan pass (2,300 rows
# of 24k in meta-day: ~5% of its day) though they change a few hundred times
# a day. A counter bumped by every change of a replica lets it read them again
# only when something changed (`catalog.ready_tables_since`).
#
# Freeing a job's machines deleted its allocation rows one trigger each (~70
# for a job with preprocessing) though its job row's own change is logged in
# its cluster already: `fleet.release_job` sets `quiet` for that delete and
# logs the machines' other clusters (machines in transit) itself.
_M5 = (
    """
CREATE TABLE catalog_seq (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
INSERT INTO catalog_seq VALUES (1, 0);
CREATE TRIGGER catalog_replica_insert AFTER INSERT ON replicas BEGIN
    UPDATE catalog_seq SET n = n + 1;
END;
CREATE TRIGGER catalog_replica_update AFTER UPDATE ON replicas BEGIN
    UPDATE catalog_seq SET n = n + 1;
END;
CREATE TRIGGER catalog_replica_delete AFTER DELETE ON replicas BEGIN
    UPDATE catalog_seq SET n = n + 1;
END;

ALTER TABLE fleet_seq ADD COLUMN quiet INTEGER NOT NULL DEFAULT 0;
DROP TRIGGER fleet_alloc_delete;
"""
    + _ALLOC_DELETE_TRIGGER
    + """"""
)

# Machines and allocations are only ever looked up by their text keys (a job's
# start reads every machine it takes and what each one holds; a sync reads the
# allocations on a list of hosts). As rowid tables each lookup went through the
# primary key's index and then to the row: clustered on their keys (WITHOUT
# ROWID) a lookup is one search. A job start's check of 72 machines took a
# third less time on a day's database; 4-5% of a meta-day. The triggers that
# read either table are dropped first and made again as they were (`_M4`,
# `_M5`), so no rename meets a trigger naming a table that is gone.
_M6 = (
    """
DROP TRIGGER fleet_alloc_delete;
DROP TRIGGER fleet_alloc_update;
DROP TRIGGER fleet_machine_update;

CREATE TABLE machines_keyed (
    host          TEXT PRIMARY KEY,
    region        TEXT    NOT NULL,
    rack          TEXT    NOT NULL,
    fault_domain  TEXT    NOT NULL,
    gpu_type      TEXT,
    gpus          INTEGER NOT NULL,
    cpu_cores     INTEGER NOT NULL,
    memory_gb     INTEGER NOT NULL,
    cluster       TEXT,
    healthy       INTEGER NOT NULL DEFAULT 1
) WITHOUT ROWID;
INSERT INTO machines_keyed (host, region, rack, fault_domain, gpu_type, gpus, cpu_cores,
                            memory_gb, cluster, healthy)
    SELECT host, region, rack, fault_domain, gpu_type, gpus, cpu_cores, memory_gb, cluster,
           healthy FROM machines;
DROP TABLE machines;
ALTER TABLE machines_keyed RENAME TO machines;
CREATE INDEX machines_cluster ON machines (cluster);

CREATE TABLE allocations_keyed (
    host        TEXT    NOT NULL,
    workload_id TEXT    NOT NULL,
    job         TEXT    NOT NULL,
    gpus        INTEGER NOT NULL,
    cpu         INTEGER NOT NULL,
    since_us    INTEGER NOT NULL,
    PRIMARY KEY (host, workload_id, job)
) WITHOUT ROWID;
INSERT INTO allocations_keyed (host, workload_id, job, gpus, cpu, since_us)
    SELECT host, workload_id, job, gpus, cpu, since_us FROM allocations;
DROP TABLE allocations;
ALTER TABLE allocations_keyed RENAME TO allocations;
CREATE INDEX allocations_job ON allocations (workload_id, job);

"""
    + _ALLOC_DELETE_TRIGGER
    + """"""
    + _ALLOC_UPDATE_TRIGGER
    + """"""
    + _MACHINE_UPDATE_TRIGGER
    + """"""
)

# A workload its owner gave up on before it ever ran is WITHDRAWN (a scenario's
# `patience`, `actors/common/client.py`). SQLite cannot change a CHECK in place:
# the queue is copied into a table with the new list of states.
_M7 = (
    _workloads_table("workloads_v7", "'DONE', 'FAILED', 'WITHDRAWN'")
    + f"""
INSERT INTO workloads_v7 ({_WORKLOAD_COLUMNS})
    SELECT {_WORKLOAD_COLUMNS} FROM workloads;
DROP TABLE workloads;
ALTER TABLE workloads_v7 RENAME TO workloads;
CREATE INDEX workloads_state ON workloads (state);
"""
)

MAST_SCHEMA = SchemaPart("mast", (_M1, _M2, _M3, _M4, _M5, _M6, _M7))
