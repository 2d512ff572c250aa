"""Comparing placement indices: what must be equal between a derived index and a rebuild."""

from __future__ import annotations

from actors.policies.mast.placement.capacity import ClusterIndex
from actors.policies.mast.placement.racks import RackPool


def index_state(ix: ClusterIndex) -> dict[str, object]:
    """The parts of a cluster index that an update must leave as a rebuild would."""

    def pool(p: RackPool) -> tuple[object, ...]:
        # `unit` may stay False after changes where a rebuild finds True; both are correct.
        return (p.slots, p.room, p.order, p.total)

    return {
        "gpu_free": ix.gpu_free,
        "cpu_free": ix.cpu_free.frozen(),
        "cpu_hosts": ix.cpu_hosts,
        "gpu_hw": ix.gpu_hw,
        "pools": {t: pool(p) for t, p in ix.pools.items() if p.total},
        "cpu_pool": pool(ix.cpu_pool),
        "keys": ix.keys,
        "scan": ix.scan,
    }
