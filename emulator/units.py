"""Emulated time: integer microseconds everywhere inside the kernel.

Float seconds accumulate rounding error and have frozen virtual clocks at
large timestamps, so the kernel never stores time as a float. Durations typed
by people (scenario files, CLI flags) are parsed here into microseconds.
"""

from __future__ import annotations

import re
from typing import Any

from emulator.errors import InputError

US = 1
MS = 1_000
S = 1_000_000
# The same second, named for conversions (`t_us / US_PER_S`).
US_PER_S = S
MIN = 60 * S
H = 60 * MIN
DAY = 24 * H

# A duration beyond 100 years is a typo, and would overflow SQLite's 64-bit
# integers (or float -> int) further down.
DURATION_US_MAX = 36_500 * DAY

_UNITS = {"us": US, "ms": MS, "s": S, "m": MIN, "min": MIN, "h": H, "d": DAY}
_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|min|s|m|h|d)")


def parse_duration_us(value: str | int | float) -> int:
    """Parse `"1h30m"`, `"250ms"`, `"1.5s"` or a number of seconds into microseconds."""
    if isinstance(value, bool):
        raise InputError("", "", f"expected a duration, got {value!r}")
    if isinstance(value, int | float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError("", "", f"expected a finite duration, got {value!r}")
        return round(value * S)
    text = value.strip().replace(" ", "")
    if not text:
        raise InputError("", "", "empty duration")
    sign = 1
    if text.startswith("-"):
        sign, text = -1, text[1:]
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise InputError(
            "",
            "",
            f"cannot read duration {value!r}: "
            "use a number of seconds or e.g. '90s', '1h30m', '250ms'",
        )
    return sign * round(total)


def format_us(t_us: int) -> str:
    """Render emulated time compactly for humans: `1h02m03.250s`, `45.000ms`."""
    sign = "-" if t_us < 0 else ""
    t = abs(t_us)
    if t < S:
        return f"{sign}{t / MS:.3f}ms"
    hours, rest = divmod(t, H)
    minutes, rest = divmod(rest, MIN)
    seconds = rest / S
    if hours:
        return f"{sign}{hours}h{minutes:02d}m{seconds:06.3f}s"
    if minutes:
        return f"{sign}{minutes}m{seconds:06.3f}s"
    return f"{sign}{seconds:.3f}s"


class Duration(int):
    """Microseconds of emulated time, written as `"1h30m"`, `"250ms"` or seconds.

    Scenario and parameter Structs type their durations with it; decoding goes
    through `decode_duration` (msgspec's `dec_hook`), so every duration a
    person writes is read the same way and bounded by `DURATION_US_MAX`.
    """


def decode_duration(obj: Any) -> Duration:
    """`obj` (a duration string or a number of seconds) as a Duration; ValueError says why not."""
    if isinstance(obj, bool) or not isinstance(obj, str | int | float):
        raise TypeError(f"expected a duration such as '90s' or '1h30m', got {obj!r}")
    too_large = f"duration {obj!r} is too large (at most {DURATION_US_MAX // DAY}d)"
    try:
        value = parse_duration_us(obj)
    except InputError as error:
        raise ValueError(error.message) from None
    except OverflowError:  # e.g. 1e308 seconds: float infinity after scaling
        raise ValueError(too_large) from None
    if value < 0:
        raise ValueError(f"a duration must not be negative, got {obj!r}")
    if value > DURATION_US_MAX:
        raise ValueError(too_large)
    return Duration(value)


DURATION_DOC = "duration: seconds, or a string such as '250ms', '90s', '1h30m'"


def duration_schema() -> dict[str, Any]:
    """The JSON Schema of a Duration field (for `mastemu schema`)."""
    return {
        "anyOf": [
            {"type": "string", "pattern": r"^(\d+(\.\d+)?(us|ms|min|s|m|h|d))+$"},
            {"type": "number", "minimum": 0, "maximum": DURATION_US_MAX // S},
        ],
        "description": DURATION_DOC,
    }
