"""A throughput table file: iterations per second of each model at each batch size.

`[system.workload] throughputs = "FILE"` (relative to the scenario) gives
the training speed the Gavel/Shockwave simulator takes run times from
(`actors/cluster/batch_sizes.py` uses it under `semantics.batch_size =
"trace"`). Two JSON layouts are read:

- mastemu's, model → batch size → iterations per second, where a value is
  one number (any gang size) or an object GPU count → iterations/s::

      {"ResNet-18": {"16": 25.1, "32": {"1": 23.0, "2": 44.2}},
       "LM": {"5": 12.0, "80": 3.6}}

- Gavel's own (`scheduler/*throughputs*.json` of its and Shockwave's
  artifacts), worker type → "('JOB TYPE', GPUS)" → {"null": iterations/s,
  co-located pairs…}: the isolated throughput ("null") of the worker type
  `worker` (default "v100") is read, the pairs are not.

Model names are read as the Shockwave traces name them ("LM" is the LSTM,
"Recommendation" Recoder; `traces.model_key`). A table entry must be a
finite number > 0; a bad one is an InputError naming the file and the key.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import msgspec

from actors.cluster.traces import model_key
from actors.cluster.traces.rows import BATCH_SUFFIX
from emulator.errors import InputError

__all__ = ["ANY_GPUS", "ThroughputTable", "load_throughputs", "parse_throughputs"]

ANY_GPUS = 0  # the key of a throughput given for every gang size
_GAVEL_KEY = re.compile(r"^\('(.+)', (\d+)\)$")
# Put a limit on everything: a table file is small.
TABLE_BYTES_MAX = 64 * 1024 * 1024


class ThroughputTable(msgspec.Struct, frozen=True, kw_only=True):
    """model key → batch size → GPU count (ANY_GPUS: any) → iterations per second."""

    source: str
    table: dict[str, dict[int, dict[int, float]]]

    def iterations_per_s(self, model: str, batch_size: int, gpus: int) -> float | None:
        """The speed of `model` at `batch_size` on a gang of `gpus`, or None if not listed."""
        by_gpus = self.table.get(model, {}).get(batch_size)
        if by_gpus is None:
            return None
        return by_gpus.get(gpus, by_gpus.get(ANY_GPUS))


def _rate(source: str, path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(source, path, f"must be a number, got {value!r}")
    if not value > 0:
        raise InputError(source, path, f"must be > 0, got {value!r}")
    return float(value)


def _whole(source: str, path: str, text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise InputError(source, path, f"{text!r} is not a whole number") from None
    if n < 1:
        raise InputError(source, path, f"must be >= 1, got {n}")
    return n


def _mastemu(source: str, raw: dict[str, Any]) -> dict[str, dict[int, dict[int, float]]]:
    out: dict[str, dict[int, dict[int, float]]] = {}
    for model, sizes in raw.items():
        if not isinstance(sizes, dict):
            raise InputError(source, model, "must map batch sizes to iterations per second")
        rows = out.setdefault(model_key(model, "shockwave"), {})
        for size, value in sizes.items():
            batch = _whole(source, f"{model}.{size}", size)
            if isinstance(value, dict):
                rows[batch] = {
                    _whole(source, f"{model}.{size}.{g}", g): _rate(
                        source, f"{model}.{size}.{g}", v
                    )
                    for g, v in value.items()
                }
            else:
                rows[batch] = {ANY_GPUS: _rate(source, f"{model}.{size}", value)}
    return out


def _gavel(source: str, raw: dict[str, Any], worker: str) -> dict[str, dict[int, dict[int, float]]]:
    if worker not in raw:
        raise InputError(source, worker, f"no such worker type; the file has {sorted(raw)}")
    out: dict[str, dict[int, dict[int, float]]] = {}
    for key, entry in raw[worker].items():
        match = _GAVEL_KEY.match(key)
        where = f"{worker}.{key}"
        if match is None or not isinstance(entry, dict) or "null" not in entry:
            raise InputError(source, where, 'not a Gavel entry: "(\'JOB TYPE\', GPUS)": {"null"}')
        job_type, gpus = match.group(1), int(match.group(2))
        size = BATCH_SUFFIX.search(job_type)
        if size is None:  # A3C, CycleGAN: one batch size, not named; nothing to scale
            continue
        batch = _whole(source, where, size.group(1))
        rows = out.setdefault(model_key(job_type, "shockwave"), {})
        rows.setdefault(batch, {})[gpus] = _rate(source, f"{where}.null", entry["null"])
    return out


def parse_throughputs(
    text: str, source: str = "<throughputs>", worker: str = "v100"
) -> ThroughputTable:
    """The table in `text` (either layout, see the module docstring)."""
    try:
        raw = msgspec.json.decode(text)
    except msgspec.DecodeError as error:
        raise InputError(source, "", f"not JSON: {error}") from None
    if not isinstance(raw, dict) or not raw:
        raise InputError(source, "", "must be a non-empty JSON object")
    gavel = all(
        isinstance(v, dict) and v and all(_GAVEL_KEY.match(k) for k in v) for v in raw.values()
    )
    table = _gavel(source, raw, worker) if gavel else _mastemu(source, raw)
    return ThroughputTable(source=source, table=table)


def load_throughputs(path: Path, worker: str = "v100") -> ThroughputTable:
    """Read the table file at `path`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    if len(data) > TABLE_BYTES_MAX:
        raise InputError(str(path), "", f"larger than {TABLE_BYTES_MAX} bytes")
    return parse_throughputs(data.decode("utf-8", errors="replace"), str(path), worker)
