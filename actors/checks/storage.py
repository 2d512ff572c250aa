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


class StorageBook:
    """Which table replicas each region holds or has reserved, and their bytes.

    Fed from the `storage` and `catalog` setup facts and the store events that
    reserve (`migration.order`, a replica made ready) or free (`migration.cancel`,
    `catalog.delete`) a replica's bytes; shared by the `storage` invariant and
    the liveness judge, which must agree on what "room" means.
    """

    def __init__(self) -> None:
        self.capacity: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        self.held: set[tuple[str, str]] = set()
        self.used: dict[str, int] = {}

    def setup(self, type_: str, payload: Any) -> None:
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

    def add(self, table: str, region: str) -> bool:
        """Count a replica of `table` in `region`; False if it was counted already."""
        if (table, region) in self.held:
            return False
        self.held.add((table, region))
        self.used[region] = self.used.get(region, 0) + self.sizes.get(table, 0)
        return True

    def remove(self, table: str, region: str) -> None:
        if (table, region) in self.held:
            self.held.discard((table, region))
            self.used[region] -= self.sizes.get(table, 0)

    def over(self, region: str) -> int | None:
        """The capacity `region` exceeds now, or None while it holds no more than it."""
        cap = self.capacity.get(region)
        return cap if cap is not None and self.used.get(region, 0) > cap else None

    def has_room(self, region: str, tables: list[str]) -> bool:
        """Whether `tables` (those not there yet) fit in what `region` has left.

        A run that stated no capacities has room everywhere.
        """
        cap = self.capacity.get(region)
        if cap is None:
            return True
        extra = sum(self.sizes.get(t, 0) for t in set(tables) if (t, region) not in self.held)
        return self.used.get(region, 0) + extra <= cap


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
        self.book = StorageBook()

    def on_setup(self, type_: str, payload: Any) -> None:
        self.book.setup(type_, payload)

    def _add(self, table: str, region: str, t_us: int) -> list[str]:
        if not self.book.add(table, region):
            return []
        cap = self.book.over(region)
        if cap is not None:
            return [
                f"{region} holds {self.book.used[region]:,} bytes over its {cap:,}-byte capacity "
                f"after {table} was placed there at {t_us} µs"
            ]
        return []

    def on_order(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        return self._add(args[1], args[3], event.t_us) if result is not None else []

    def on_replica(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        return self._add(args[0], args[1], event.t_us)

    def on_drop(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.book.remove(result[0], result[1])
        return []

    def on_delete(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.book.remove(args[0], args[1])
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
