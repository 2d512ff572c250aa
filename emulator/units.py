"""Emulated time: integer microseconds everywhere inside the kernel.

Float seconds accumulate rounding error and have frozen virtual clocks at
large timestamps, so the kernel never stores time as a float. Durations typed
by people (scenario files, CLI flags) are parsed here into microseconds.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

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
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


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
    if _NUMBER.fullmatch(text):  # a bare number is seconds, as in a scenario file
        return sign * round(float(text) * S)
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
    A field where a small value would stall a run (a period of zero fires
    forever at one instant) is typed `at_least(MIN_US)` instead: a subclass
    with that minimum, which decoding enforces and `mastemu schema` states.
    """

    min_us: ClassVar[int] = 0
    # 0 is allowed besides [min_us, …]: for periods where 0 means "never" (off).
    zero_ok: ClassVar[bool] = False

    @classmethod
    def bound_text(cls) -> str:
        """The bound in words, for messages and the schema ("" for a plain Duration)."""
        if cls.min_us == 0:
            return ""
        text = f"at least {format_duration(cls.min_us)}"
        return f"0 (off) or {text}" if cls.zero_ok else text


_AT_LEAST: dict[tuple[int, bool], type[Duration]] = {}


def at_least(min_us: int, *, zero_ok: bool = False) -> type[Duration]:
    """The Duration type of values of at least `min_us` µs (or 0, with `zero_ok`)."""
    key = (min_us, zero_ok)
    if key not in _AT_LEAST:
        name = f"DurationAtLeast{min_us}us" + ("OrZero" if zero_ok else "")
        _AT_LEAST[key] = type(name, (Duration,), {"min_us": min_us, "zero_ok": zero_ok})
    return _AT_LEAST[key]


def format_duration(us: int) -> str:
    """A duration as a person writes it: `1s`, `100ms`, `1h30m`."""
    for unit, size in (("d", DAY), ("h", H), ("m", MIN), ("s", S), ("ms", MS)):
        if us >= size and us % size == 0:
            return f"{us // size}{unit}"
    return f"{us}us"


def decode_duration(obj: Any, type_: type[Duration] = Duration) -> Duration:
    """`obj` (a duration string or a number of seconds) as a `type_`; ValueError says why not."""
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
    if value < type_.min_us and not (value == 0 and type_.zero_ok):
        raise ValueError(f"{obj!r} is too short: must be {type_.bound_text()}")
    return type_(value)


DURATION_DOC = "duration: seconds, or a string such as '250ms', '90s', '1h30m'"


def duration_schema(type_: type[Duration] = Duration) -> dict[str, Any]:
    """The JSON Schema of a Duration field (for `mastemu schema`), with its bound."""
    number: dict[str, Any] = {"type": "number", "maximum": DURATION_US_MAX // S}
    number["minimum"] = 0 if type_.zero_ok else type_.min_us / S
    bound = type_.bound_text()
    schema: dict[str, Any] = {
        "anyOf": [
            {"type": "string", "pattern": r"^(\d+(\.\d+)?|(\d+(\.\d+)?(us|ms|min|s|m|h|d))+)$"},
            number,
        ],
        "description": DURATION_DOC + (f"; {bound}" if bound else ""),
    }
    return schema
