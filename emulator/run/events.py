"""Trace events read by name: `named(event)` gives every payload field its name.

The kernel records each event's payload in the most compact form it has:
deliveries as the Envelope (a map), but a store write as the pair `(args,
result)` with the repository function's positional arguments, a drop as
`(reason, envelope)`, a flow as a tuple, a crash as its reason alone. Those
bytes are what the trace hash covers, so they stay as they are; this module
only reads them. A reader that indexes them (`e.payload[0][3]`) breaks
silently when a parameter is added, and says nothing about what it reads;
`named(e).job_name` says both.

What each kind's fields are:

- `store`: the tagged repository function's parameters after `store`, by name
  (`store.events.PARAMETERS`, recorded when the function is defined, so the
  module defining it must be imported), and its return value as `result`. A
  trailing parameter the caller left to its default is absent.
- `deliver`: the Envelope's fields (`src`, `dst`: the address the sender
  used, `to`, `msg`: the message's own fields, `sent_us`, `corr`, `reply_to`).
- `drop`: `reason`, then the Envelope's fields; a message that never got an
  envelope (`no-leader`, `unknown-address`) has only `reason` and `msg`.
- `timer`: `msg`.
- `flow`: `start` (flow_id, src_region, dst_region, nbytes, qos), `cap`
  (flow_id, cap_bps), `cancel` (flow_id, bytes_done), `done` (flow_id).
- the kernel's single values: `crash` (reason), `start` and `restart`
  (incarnation), `restart-deferred` (host), `gave-up` (restarts), `pause`
  (duration_us), `slow-store` (latency_us), `violation` (message), and the
  run's `end` (status).
- maps (decisions, faults, `setup` facts, the run's `start` and `resume`,
  `hardware-replay`) are their own fields; no payload at all is no fields.

The names of the kernel's tuples and single values are the ones its record
calls use (`emulator/kernel.py`, `emulator/run/runner.py`);
`tests/unit/test_named_events.py` runs a kernel to keep them in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

import msgspec

from emulator.commands import Envelope
from emulator.errors import InputError
from store.events import PARAMETERS, RESULT

__all__ = ["NamedEvent", "named"]

_ENVELOPE_FIELDS = frozenset(f.name for f in msgspec.structs.fields(Envelope))

# Payloads the kernel records as one value: kind -> that value's name.
_SINGLE = {
    "crash": "reason",
    "start": "incarnation",
    "restart": "incarnation",
    "restart-deferred": "host",
    "gave-up": "restarts",
    "pause": "duration_us",
    "slow-store": "latency_us",
    "violation": "message",
}

# Flow payloads by event type (`Kernel.start_flow`, `set_flow_rate_cap`, `_cancel_flow`,
# `_flow_check`); a single value is recorded bare, not as a one-element tuple.
_FLOW = {
    "start": ("flow_id", "src_region", "dst_region", "nbytes", "qos"),
    "cap": ("flow_id", "cap_bps"),
    "cancel": ("flow_id", "bytes_done"),
    "done": ("flow_id",),
}


class _Event(Protocol):
    """What `named` reads: a trace event as the tracer and the run database give it."""

    @property
    def seq(self) -> int: ...
    @property
    def t_us(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def src(self) -> str: ...
    @property
    def dst(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def payload(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class NamedEvent:
    """One trace event with its payload's fields by name.

    `fields` maps every field name to its decoded value (builtins, as the
    trace holds them). A field can also be read as an attribute
    (`e.workload_id`, `e.result`) unless the event has an attribute of that
    name: `e.src` and `e.dst` are always the event's own, the Envelope's
    `dst` (the address the sender used) is `e.fields["dst"]`.
    """

    seq: int
    t_us: int
    kind: str
    src: str
    dst: str
    type: str
    fields: Mapping[str, Any] = field(hash=False)

    def __getattr__(self, name: str) -> Any:
        # Called only when normal lookup fails. Dunder and `fields` lookups must not
        # come here while the instance is half built (copy, pickle).
        if name == "fields" or name.startswith("__"):
            raise AttributeError(name)
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(
                f"{self.kind} event {self.type!r} (seq {self.seq}) has no field {name!r}; "
                f"its fields are {sorted(self.fields)}"
            ) from None


def named(event: _Event) -> NamedEvent:
    """`event` with its payload's fields named (see the module docstring for each kind).

    Raises InputError for a payload that does not have its kind's shape, or a
    store event whose repository function was never defined in this process.
    """
    fields = _fields(event)
    return NamedEvent(
        event.seq,
        event.t_us,
        event.kind,
        event.src,
        event.dst,
        event.type,
        MappingProxyType(fields),
    )


def _fields(event: _Event) -> dict[str, Any]:
    kind, payload = event.kind, event.payload
    if kind == "store":
        return _store_fields(event)
    if kind == "deliver":
        return _envelope(event, payload)
    if kind == "drop":
        reason, body = _pair(event, payload)
        if _is_envelope(body):
            return {"reason": reason, **body}
        return {"reason": reason, "msg": body}
    if kind == "timer":
        return {"msg": payload}
    if kind == "flow":
        names = _FLOW.get(event.type)
        if names is None:
            raise _malformed(event, f"unknown flow event type {event.type!r}")
        values = (payload,) if len(names) == 1 else payload
        return _zip(event, names, values)
    if kind == "run" and event.type == "end":
        return {"status": payload}
    name = _SINGLE.get(kind)
    if name is not None:
        return {name: payload}
    if payload is None:
        return {}
    if isinstance(payload, dict):
        return dict(payload)
    raise _malformed(event, f"a {kind} payload should be a map, not {type(payload).__name__}")


def _store_fields(event: _Event) -> dict[str, Any]:
    args, result = _pair(event, event.payload)
    names = PARAMETERS.get(event.type)
    if names is None:
        raise InputError(
            "trace",
            f"event {event.seq}",
            f"no parameter names known for store event {event.type!r}: "
            "import the module that defines its repository function",
        )
    fields = _zip(event, names[: len(args)], args)
    fields[RESULT] = result
    return fields


def _envelope(event: _Event, payload: Any) -> dict[str, Any]:
    if not _is_envelope(payload):
        raise _malformed(event, "a delivery's payload should be an Envelope")
    return dict(payload)


def _is_envelope(value: Any) -> bool:
    return isinstance(value, dict) and value.keys() == _ENVELOPE_FIELDS


def _pair(event: _Event, payload: Any) -> tuple[Any, Any]:
    if not isinstance(payload, list | tuple) or len(payload) != 2:
        raise _malformed(event, "expected a pair")
    first, second = payload
    return first, second


def _zip(event: _Event, names: tuple[str, ...], values: Any) -> dict[str, Any]:
    if not isinstance(values, list | tuple) or len(values) != len(names):
        raise _malformed(event, f"expected {len(names)} values ({', '.join(names)})")
    return dict(zip(names, values, strict=True))


def _malformed(event: _Event, why: str) -> InputError:
    return InputError("trace", f"event {event.seq}", f"{event.kind} {event.type!r}: {why}")
