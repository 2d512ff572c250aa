"""Reading a Chrome trace (`mastemu export --format chrome`) back: names, spans, nesting."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, order=True)
class Span:
    """A complete slice (`X`) or an async pair (`b`/`e`), as the viewer shows it."""

    pid: int
    tid: int
    name: str
    cat: str
    ts: int
    dur: int
    args: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def process_names(events: list[dict[str, Any]]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}


def thread_names(events: list[dict[str, Any]]) -> dict[int, tuple[int, str]]:
    """tid → (pid, name)."""
    return {
        e["tid"]: (e["pid"], e["args"]["name"])
        for e in events
        if e["ph"] == "M" and e.get("name") == "thread_name"
    }


def spans(events: list[dict[str, Any]]) -> list[Span]:
    """Every span: complete slices and async begin/end pairs (matched by cat and id)."""
    found = [
        Span(e["pid"], e["tid"], e["name"], e.get("cat", ""), e["ts"], e["dur"], e.get("args", {}))
        for e in events
        if e["ph"] == "X"
    ]
    begins: dict[tuple[str, Any], dict[str, Any]] = {}
    for e in events:
        if e["ph"] == "b":
            begins[(e["cat"], e["id"])] = e
    for e in events:
        if e["ph"] == "e":
            b = begins.pop((e["cat"], e["id"]))
            found.append(
                Span(
                    b["pid"],
                    b["tid"],
                    b["name"],
                    b["cat"],
                    b["ts"],
                    e["ts"] - b["ts"],
                    b.get("args", {}),
                )
            )
    assert not begins, f"async begins without an end: {sorted(begins)[:3]}"
    return found


def unnested_slices(events: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Complete slices of one thread that overlap without nesting (the format forbids it)."""
    by_tid: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            by_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    bad: list[tuple[Any, Any]] = []
    for slices in by_tid.values():
        # Longest first at equal starts, so a parent comes before its children.
        slices.sort(key=lambda s: (s[0], -s[1]))
        stack: list[tuple[int, int]] = []
        for s in slices:
            while stack and stack[-1][1] <= s[0]:
                stack.pop()
            if stack and s[1] > stack[-1][1]:
                bad.append((stack[-1], s))
            stack.append(s)
    return bad
