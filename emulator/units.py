"""Emulated time: integer microseconds everywhere inside the kernel.

Float seconds accumulate rounding error and have frozen virtual clocks at
large timestamps, so the kernel never stores time as a float. Durations typed
by people (scenario files, CLI flags) are parsed here into microseconds.
"""

from __future__ import annotations

import re

US = 1
MS = 1_000
S = 1_000_000
MIN = 60 * S
H = 60 * MIN
DAY = 24 * H

_UNITS = {"us": US, "ms": MS, "s": S, "m": MIN, "min": MIN, "h": H, "d": DAY}
_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|min|s|m|h|d)")


class DurationError(ValueError):
    """A duration string that cannot be read."""


def parse_duration_us(value: str | int | float) -> int:
    """Parse `"1h30m"`, `"250ms"`, `"1.5s"` or a number of seconds into microseconds."""
    if isinstance(value, bool):
        raise DurationError(f"expected a duration, got {value!r}")
    if isinstance(value, int | float):
        if value != value or value in (float("inf"), float("-inf")):
            raise DurationError(f"expected a finite duration, got {value!r}")
        return round(value * S)
    text = value.strip().replace(" ", "")
    if not text:
        raise DurationError("empty duration")
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
        raise DurationError(
            f"cannot read duration {value!r}: "
            "use a number of seconds or e.g. '90s', '1h30m', '250ms'"
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
