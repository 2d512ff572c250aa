"""What every trace format shares: a data row's typed fields, its problems, and model names.

A `Row` parses one field at a time and records why it could not (a
`RowProblem` naming line, column, value and reason) instead of raising: a
row becomes a job only if it has no problem at all, and the loader decides
whether a bad row is fatal (`trace_error`, an InputError naming file, line
and column) or skipped and listed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

import msgspec

from actors.cluster.workloads import DALLY_MODELS, GAVEL_MODELS, TIRESIAS_MODELS
from actors.policies.cluster import perf_model as pm
from actors.policies.cluster.api import TraceJob
from emulator.errors import InputError
from emulator.units import US_PER_S

__all__ = [
    "GPUS_MAX",
    "INT_MAX",
    "SECONDS_MAX",
    "Parsed",
    "Row",
    "RowProblem",
    "TraceFormat",
    "default_known_models",
    "model_key",
    "trace_error",
]

TraceFormat = Literal["tiresias", "shockwave", "jobs-csv"]
# Put a limit on everything: larger values are typos or another format, and
# µs times must stay within 64-bit integers when records are encoded.
SECONDS_MAX = 1e9  # ~32 years
# Absolute times (epoch seconds, ISO dates) in a cluster log: up to the year 2286.
EPOCH_S_MAX = 1e10
GPUS_MAX = 1_000_000
INT_MAX = 2**63 - 1
# Shockwave trace job types whose names differ from Table 2's and perf_model's.
_SHOCKWAVE_MODEL_ALIASES = {"lm": "lstm", "recommendation": "recoder"}
BATCH_SUFFIX = re.compile(r"\s*\(batch size ([^)]*)\)\s*$", re.IGNORECASE)
_NON_ALNUM = re.compile(r"[^a-z0-9]")


class RowProblem(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A bad field: its 1-based `line`, its `column`, the raw `value` and why."""

    line: int
    column: str
    value: str
    reason: str


class Parsed(msgspec.Struct, frozen=True):
    """One data row: its job (None if it has problems or is dropped) and why not.

    `dropped` is the reason a well-formed row is not a job (a cluster log's
    CPU-only job, a job that never ran, a state left out); such rows are
    counted and listed in the report, never bad.
    """

    line: int
    job: TraceJob | None
    problems: tuple[RowProblem, ...]
    gpu_type: str = ""
    dropped: str = ""


def trace_error(path: str, line: int, column: str, reason: str) -> InputError:
    """The trace cannot be trusted as a whole: an InputError naming file, line and column."""
    return InputError(f"{path}:{line}", f"column {column}", reason)


# ---- model names ---------------------------------------------------------------------
def model_key(name: str, fmt: TraceFormat = "tiresias") -> str:
    """The model key a trace's model name maps to: lower case, letters and digits only.

    A Shockwave job type loses its "(batch size N)" suffix first. perf_model's
    aliases are honoured ("InceptionV3" → "inception3").
    """
    if fmt == "shockwave":
        name = BATCH_SUFFIX.sub("", name)
    key = _NON_ALNUM.sub("", name.lower())
    if fmt == "shockwave":
        key = _SHOCKWAVE_MODEL_ALIASES.get(key, key)
    if key in pm.PROFILES:
        return key
    prof = pm.profile(key)
    # An alias resolves to one of the table's own profile objects: find its key.
    return next(
        (k for k, v in pm.PROFILES.items() if v is prof and prof is not pm.DEFAULT_PROFILE), key
    )


def default_known_models() -> frozenset[str]:
    """perf_model's models and the generators' model lists."""
    return frozenset(pm.PROFILES) | set(TIRESIAS_MODELS + GAVEL_MODELS + DALLY_MODELS)


# ---- field parsing ---------------------------------------------------------------------
class Row:
    """One data row: typed getters parse a field or record why they can't.

    A getter that fails returns a placeholder (0, "") and adds a RowProblem;
    the row becomes a job only if it has no problem at all.
    """

    def __init__(self, line: int, fields: dict[str, str], *, fields_ok: bool = True) -> None:
        self.line, self.fields = line, fields
        # A short row already has its "missing" problem: its absent columns
        # are not reported again one by one.
        self.fields_ok = fields_ok
        self.problems: list[RowProblem] = []

    def bad(self, column: str, value: str, reason: str) -> None:
        self.problems.append(RowProblem(line=self.line, column=column, value=value, reason=reason))

    def raw(self, column: str, *, required: bool = True) -> str | None:
        """The stripped field, or None if it is empty or absent (a problem if required)."""
        value = self.fields.get(column, "").strip()
        if value:
            return value
        if required and (self.fields_ok or column in self.fields):
            self.bad(column, "", "missing")
        return None

    def text(self, column: str) -> str:
        return self.raw(column) or ""

    def whole(self, column: str, minimum: int, maximum: int = INT_MAX) -> int:
        raw = self.raw(column)
        if raw is None:
            return 0
        try:
            value = int(raw)
        except ValueError:
            self.bad(column, raw, "not a whole number")
            return 0
        if not minimum <= value <= maximum:
            self.bad(
                column, raw, f"must be >= {minimum}" if value < minimum else f"must be <= {maximum}"
            )
            return 0
        return value

    def number(
        self,
        column: str,
        *,
        lower: float = -math.inf,
        strict: bool = False,
        upper: float = math.inf,
    ) -> float:
        """A finite number in [lower, upper] (lower excluded if strict)."""
        raw = self.raw(column)
        if raw is None:
            return 0.0
        try:
            value = float(raw)
        except ValueError:
            self.bad(column, raw, "not a number")
            return 0.0
        if not math.isfinite(value):
            self.bad(column, raw, "must be finite")
        elif value < lower or (strict and value == lower):
            self.bad(column, raw, f"must be {'>' if strict else '>='} {lower:g}")
        elif value > upper:
            self.bad(column, raw, f"must be <= {upper:g}")
        else:
            return value
        return 0.0

    def us(self, column: str, *, positive: bool) -> int:
        """Seconds in the file, µs out: in [0, SECONDS_MAX], and >= 1 µs if `positive`."""
        before = len(self.problems)
        us = round(self.number(column, lower=0.0, strict=positive, upper=SECONDS_MAX) * US_PER_S)
        if positive and us < 1 and len(self.problems) == before and column in self.fields:
            self.bad(column, self.fields[column].strip(), "rounds to 0 µs")
        return us

    def instant_s(self, column: str) -> float | None:
        """A point in time in seconds: a number (epoch or relative seconds) or an ISO 8601 date.

        ISO dates ("2020-04-01 00:00:07", "2023-07-01T08:00:00+08:00",
        fractions and "Z" allowed) without an offset are read as UTC. None if
        the field is empty (not a problem: the caller decides) or bad.
        """
        raw = self.raw(column, required=False)
        if raw is None:
            return None
        try:
            value = float(raw)
        except ValueError:
            try:
                stamp = datetime.fromisoformat(raw)
            except ValueError:
                self.bad(column, raw, "neither seconds nor an ISO 8601 date")
                return None
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            value = stamp.timestamp()
        if not (math.isfinite(value) and 0 <= value <= EPOCH_S_MAX):
            self.bad(column, raw, f"must be a time in 0..{EPOCH_S_MAX:g} s")
            return None
        return value

    def choice(self, column: str, options: Sequence[str]) -> str:
        raw = self.raw(column)
        if raw is not None and raw not in options:
            self.bad(column, raw, f"not one of {'/'.join(options)}")
        return raw or options[0]
