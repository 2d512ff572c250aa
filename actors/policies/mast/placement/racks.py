"""Free capacity grouped by rack, and the rack choice of RMS placement (MAST §4.3).

A `RackPool` holds the free units of some machines (GPUs of one type, or 1
per free CPU machine): each rack's machines sorted most free first, its
room, and the racks ordered roomiest first. `choose` is placement's rack
choice (see `placement`): one rack if one can hold the job — the fewest
machines, then the least room, then the smallest id — else the roomiest
racks whole until the rest fits in one. It reads only the racks it takes
and the ones that fit, found by bisection in the room order, so its cost
does not grow with the racks that are full. `with_units` is the pool after
some machines' free units changed, rebuilding only their racks.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Iterable, Mapping

from emulator.errors import ComponentBug

Slot = tuple[str, int]  # (host, units usable): GPUs, or 1 for a whole CPU machine


class RackPool:
    """Free units of some machines, grouped by rack, as `placement` picks them.

    `slots[rack]` are the rack's machines with units > 0, most units first
    (ties: host); `room[rack]` their sum; `order` the racks as (-room, rack),
    ascending, so the roomiest rack comes first (ties: rack id). `unit` says
    that every machine has exactly one unit (CPU machines), so the fewest
    machines for n units is n in every rack; False promises nothing.

    A rack `with_units` changed keeps its machines unsorted ({host: units})
    until a decision reads it (`rack_slots`): holds and releases change a
    few racks of hundreds at every bid, and a bid reads one or two of them.
    Sorting then is idempotent, so a pool stays a value.
    """

    __slots__ = ("_racks", "order", "room", "total", "unit")

    def __init__(
        self,
        racks: dict[str, tuple[Slot, ...] | dict[str, int]],
        room: dict[str, int],
        order: list[tuple[int, str]],
        unit: bool,
        total: int | None = None,
    ) -> None:
        self._racks = racks
        self.room = room
        self.order = order
        self.total = sum(room.values()) if total is None else total
        self.unit = unit

    @classmethod
    def build(cls, units: Iterable[Slot], rack_of: Mapping[str, str]) -> RackPool:
        by_rack: dict[str, dict[str, int]] = defaultdict(dict)
        unit = True
        for host, n in units:
            if n > 0:
                by_rack[rack_of[host]][host] = n
                unit = unit and n == 1
        racks: dict[str, tuple[Slot, ...] | dict[str, int]] = dict(by_rack)  # sorted when read
        room = {rack: sum(hosts.values()) for rack, hosts in by_rack.items()}
        return cls(racks, room, sorted((-r, rack) for rack, r in room.items()), unit)

    def rack_slots(self, rack: str) -> tuple[Slot, ...]:
        """The rack's machines with free units, most first (ties: host)."""
        got = self._racks[rack]
        if isinstance(got, dict):
            ranked = sorted([(-n, h) for h, n in got.items()])
            got = self._racks[rack] = tuple([(h, -m) for m, h in ranked])
        return got

    @property
    def slots(self) -> dict[str, tuple[Slot, ...]]:
        """Every rack's `rack_slots` (for comparisons: decisions read racks one by one)."""
        return {rack: self.rack_slots(rack) for rack in self._racks}

    def with_units(self, units: Mapping[str, int], rack_of: Mapping[str, str]) -> RackPool:
        """This pool with the given hosts at the given units (0 removes a host)."""
        racks, room, order = self._racks.copy(), self.room.copy(), self.order.copy()
        # Each changed rack's hosts as a new dict (the old pool keeps its own).
        touched: dict[str, dict[str, int]] = {}
        for host, n in units.items():
            rack = rack_of[host]
            current = touched.get(rack)
            if current is None:
                got = racks.get(rack)
                current = touched[rack] = dict(got) if got else {}
            if n > 0:
                current[host] = n
            else:
                current.pop(host, None)
        total = self.total
        for rack, current in touched.items():
            old = room.pop(rack, 0)
            if old:
                del order[bisect_left(order, (-old, rack))]
            new = 0
            if current:
                new = sum(current.values())
                racks[rack] = current  # sorted when read (`rack_slots`)
                room[rack] = new
                insort(order, (-new, rack))
            else:
                racks.pop(rack, None)
            total += new - old
        unit = self.unit and (not units or max(units.values()) <= 1)
        return RackPool(racks, room, order, unit, total)

    def choose(self, need: int) -> tuple[list[str], str | None, int]:
        """The racks `pick` uses: those taken whole, the last one, and the units left for it.

        If some rack alone holds `need`, only it: the one needing the fewest
        machines, then the least room, then the smallest id. Otherwise the
        roomiest racks whole until what is left fits in one rack.
        """
        if need <= 0:
            return [], None, 0
        if self.total < need:
            raise ComponentBug(f"placement bug: asked for {need} units, pool has {self.total}")
        order = self.order
        whole: list[str] = []
        i = 0
        while -order[i][0] < need:
            need += order[i][0]
            whole.append(order[i][1])
            i += 1
        end = bisect_left(order, (1 - need,), i)  # order[i:end] have room >= need
        if self.unit:  # every fitting rack needs `need` machines: the tightest, then by id
            return whole, order[bisect_left(order, (order[end - 1][0],), i)][1], need
        best: tuple[int, int, str] | None = None
        for k in range(i, end):
            neg_room, rack = order[k]
            key = (_machines_for(self.rack_slots(rack), need), -neg_room, rack)
            if best is None or key < best:
                best = key
        assert best is not None
        return whole, best[2], need

    def pick(self, choice: tuple[list[str], str | None, int]) -> list[Slot]:
        """The slots of a `choose` result: whole racks, then the fewest machines of the last."""
        whole, last, need = choice
        out = [slot for rack in whole for slot in self.rack_slots(rack)]
        if last is not None:
            out += _fill(self.rack_slots(last), need)
        return out


EMPTY_POOL = RackPool({}, {}, [], True)


def _machines_for(slots: tuple[Slot, ...], need: int) -> int:
    """How many machines `_fill` takes from a rack that can hold `need`."""
    count = 0
    for _, units in slots:
        count += 1
        need -= units
        if need <= 0:
            break
    return count


def _fill(slots: tuple[Slot, ...], need: int) -> list[Slot]:
    """Fewest machines of one rack for `need` units (slots sorted largest first).

    The last machine is the smallest one that can take the rest (ties: host).
    """
    out: list[Slot] = []
    i = 0
    while slots[i][1] < need:  # even the roomiest machine left cannot finish the job
        out.append(slots[i])
        need -= slots[i][1]
        i += 1
    host, _ = min((s for s in slots[i:] if s[1] >= need), key=lambda s: (s[1], s[0]))
    out.append((host, need))
    return out
