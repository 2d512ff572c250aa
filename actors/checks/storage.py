"""Invariant checkers of the slow path (docs/design.md §8, invariant 9).

- `storage`: no region ever holds more table bytes than its warehouse
  capacity (MAST expression 4, a hard quota). A replica counts from the
  moment its copy is ordered (its bytes are reserved) until it is deleted or
  its copy cancelled.
- `migration-cap`: the migration service never moves more bytes in an
  emulated day than its daily cap.

Facts come from the `setup` events `catalog` (where each table starts) and
`storage` (capacities, table sizes, the daily cap), so a run database can be
checked on its own.
"""

from __future__ import annotations

from typing import Any

from actors.checks.base import FactsChecker
from emulator.trace import TraceEvent
from store.mast.copies import DAY_US


class StorageChecker(FactsChecker):
    name = "storage"
    _routes = {
        "migration.order": "on_order",
        "migration.cancel": "on_drop",
        "catalog.replica": "on_replica",
        "catalog.delete": "on_delete",
    }

    def __init__(self) -> None:
        super().__init__()
        self.capacity: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        self.held: set[tuple[str, str]] = set()
        self.used: dict[str, int] = {}

    def on_setup(self, type_: str, payload: Any) -> None:
        if type_ == "storage":
            self.capacity = dict(payload["capacity"])
            self.sizes = dict(payload["sizes"])
        elif type_ == "catalog":
            self.held = {(t, r) for t, regions in payload.items() for r in regions}
        else:
            return
        self.used = {}
        for table, region in sorted(self.held):
            self.used[region] = self.used.get(region, 0) + self.sizes.get(table, 0)

    def _add(self, table: str, region: str, t_us: int) -> list[str]:
        if (table, region) in self.held:
            return []
        self.held.add((table, region))
        self.used[region] = self.used.get(region, 0) + self.sizes.get(table, 0)
        cap = self.capacity.get(region)
        if cap is not None and self.used[region] > cap:
            return [
                f"{region} holds {self.used[region]:,} bytes over its {cap:,}-byte capacity "
                f"after {table} was placed there at {t_us} µs"
            ]
        return []

    def _remove(self, table: str, region: str) -> None:
        if (table, region) in self.held:
            self.held.discard((table, region))
            self.used[region] -= self.sizes.get(table, 0)

    def on_order(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        return self._add(args[1], args[3], event.t_us) if result is not None else []

    def on_replica(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        return self._add(args[0], args[1], event.t_us)

    def on_drop(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self._remove(result[0], result[1])
        return []

    def on_delete(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self._remove(args[0], args[1])
        return []


class MigrationCapChecker(FactsChecker):
    name = "migration-cap"
    _routes = {"migration.progress": "on_bytes", "migration.done": "on_bytes"}

    def __init__(self) -> None:
        super().__init__()
        self.cap: int | None = None
        self.moved: dict[int, int] = {}

    def on_setup(self, type_: str, payload: Any) -> None:
        if type_ == "storage":
            self.cap = payload.get("daily_cap_bytes")

    def on_bytes(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        added = result[2] if isinstance(result, list) else result
        if not added:
            return []
        day = args[0] // DAY_US
        before = self.moved.get(day, 0)
        self.moved[day] = before + added
        if self.cap is not None and before <= self.cap < self.moved[day]:
            return [f"day {day}: {self.moved[day]:,} bytes moved, over the {self.cap:,}-byte cap"]
        return []
