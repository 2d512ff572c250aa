"""The one-line status `mastemu replay --step` prints under each event it stops at.

Fed the same events as the player (`fold.StateFold`), it says who leads
(the GMS with its holder and epoch; how many RMS and CM roles have a leader
right now), how many workloads are queued and running, and how many GPUs
jobs hold, in at most 100 columns.
"""

from __future__ import annotations

from actors.mast.timeline.fold import StateFold
from store.mast.queue import QUEUED
from store.trace import TraceRow

WIDTH_MAX = 100
# Roles counted rather than named: one per region or cluster.
_GROUPED = ("rms/", "cm/", "ras/")


class StatusLine:
    """`feed` every event in order; `status()` describes the state after the last one."""

    def __init__(self, fold: StateFold) -> None:
        self.fold = fold

    def feed(self, row: TraceRow) -> None:
        self.fold.feed(row)
        self.fold.changes()  # nobody reads them here: keep the change log empty

    def status(self) -> str:
        s = self.fold.state
        leases = s.table("leases")
        led = {role: row for role, row in leases.items() if row["expires_at_us"] > s.t_us}
        parts = []
        gms = led.get("gms")
        if gms is not None:
            parts.append(f"gms {gms['holder']}@{gms['epoch']}")
        elif "gms" in leases:
            parts.append("gms: no leader")
        for prefix in _GROUPED:
            roles = [r for r in leases if r.startswith(prefix)]
            if roles:
                n = sum(r in led for r in roles)
                parts.append(f"{prefix[:-1]} {n}/{len(roles)} led")
        others = sorted(
            r for r in leases if r != "gms" and not r.startswith(("rms/", "cm/", "ras/"))
        )
        for role in others[:2]:
            row = led.get(role)
            parts.append(f"{role} {row['holder']}@{row['epoch']}" if row else f"{role}: none")
        workloads = s.table("workloads").values()
        if workloads:
            queued = sum(w["state"] in QUEUED for w in workloads)
            running = sum(w["state"] == "RUNNING" for w in workloads)
            parts.append(f"queue {queued} · running {running}")
        total = sum(m["gpus"] for m in s.table("machines").values() if m["cluster"] is not None)
        if total:
            held = sum(a["gpus"] for a in s.table("allocations").values())
            parts.append(f"GPUs {held}/{total}")
        down = sorted(s.table("down"))
        if down:
            parts.append("down " + ",".join(down))
        text = "  " + " · ".join(parts)
        return text if len(text) <= WIDTH_MAX else text[: WIDTH_MAX - 1] + "…"
