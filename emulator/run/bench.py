"""`mastemu bench kernel`: a ring of actors, against SimPy 4 in the same process.

Three actors pass 64 tokens around a ring over links of 1–10 ms for a fixed
emulated span. Measured (a) with the trace hashed but no rows written, (b) with
trace rows written to a run database in batches, and (c) the same ring in
SimPy 4 (mailbox Stores, delivery by a Timeout callback: SimPy's fastest style
measured here). Each variant runs `repeat` times and the best rate counts,
which is steadier than the mean on a shared machine.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from emulator.actor import Actor, on
from emulator.kernel import Kernel, KernelOptions
from emulator.net.network import build_network
from emulator.net.specs import NetworkSpec, RegionSpec
from emulator.rng import RngStreams
from emulator.trace import Tracer
from emulator.units import MS, S

RING = 3
IN_FLIGHT = 64
LATENCY_US = (1 * MS, 10 * MS)


class Token(msgspec.Struct, frozen=True, tag=True, array_like=True):
    """A token passed around the ring."""

    n: int


class RingNode(Actor):
    kind = "bench-ring"

    async def on_start(self) -> None:
        index = int(self.address.rsplit("/", 1)[1])
        self.next = f"ring/{(index + 1) % RING}"
        # Spread the 64 tokens over the three nodes.
        for n in range(index, IN_FLIGHT, RING):
            self.send(self.next, Token(n))

    @on(Token)
    def forward(self, token: Token) -> None:
        self.send(self.next, token)


async def _run_ring(span_us: int, db: Path | None) -> tuple[int, float]:
    rng = RngStreams(7)
    regions = [RegionSpec(name="bench", machines=0, racks=1, fault_domains=1, control_hosts=RING)]
    network = build_network(regions, NetworkSpec(), rng)
    hosts = [f"bench/ctl{i}" for i in range(RING)]
    for i in range(RING):
        network.set_link_latency(hosts[i], hosts[(i + 1) % RING], *LATENCY_US)
    store = None
    writer = None
    if db is not None:
        from store import Store
        from store.trace import TraceWriter

        store = await Store.open(db)
        writer = TraceWriter(store)
    try:
        kernel = Kernel(
            seed=7,
            rng=rng,
            network=network,
            tracer=Tracer(writer),
            store=store,
            options=KernelOptions(yield_every_events=10_000),
        )
        for i in range(RING):
            kernel.spawn(f"ring/{i}", hosts[i], lambda a=f"ring/{i}": RingNode(a))
        t0 = time.perf_counter()
        await kernel.run(span_us)
        await kernel.tracer.flush()
        wall = time.perf_counter() - t0
        return kernel.deliveries, wall
    finally:
        if store is not None:
            await store.close()


def _simpy_ring(span_us: int) -> tuple[int, float]:
    import simpy

    env = simpy.Environment()
    boxes = [simpy.Store(env) for _ in range(RING)]
    rngs = [random.Random(f"simpy:{i}") for i in range(RING)]
    low, high = LATENCY_US
    count = [0]

    def send(dst: int, token: Token, delay: int) -> None:
        timeout = env.timeout(delay)
        timeout.callbacks.append(lambda _ev: boxes[dst].put(token))

    def node(i: int) -> Any:
        nxt = (i + 1) % RING
        rng = rngs[i]
        for n in range(i, IN_FLIGHT, RING):
            send(nxt, Token(n), low + int(rng.random() * (high - low + 1)))
        while True:
            token = yield boxes[i].get()
            count[0] += 1
            send(nxt, token, low + int(rng.random() * (high - low + 1)))

    for i in range(RING):
        env.process(node(i))
    t0 = time.perf_counter()
    env.run(until=span_us)
    return count[0], time.perf_counter() - t0


def bench_kernel(span_us: int | None = None, repeat: int = 3) -> dict[str, Any]:
    """Run the three variants and return the JSON report."""
    span = span_us or 20 * S

    def best(results: list[tuple[int, float]]) -> float:
        return max(n / w for n, w in results)

    plain, traced, simpy_runs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            plain.append(asyncio.run(_run_ring(span, None)))
            traced.append(asyncio.run(_run_ring(span, Path(tmp) / f"bench-{i}.db")))
            simpy_runs.append(_simpy_ring(span))
    rate, rate_traced, rate_simpy = best(plain), best(traced), best(simpy_runs)
    return {
        "deliveries_per_s": round(rate),
        "deliveries_per_s_traced": round(rate_traced),
        "simpy_deliveries_per_s": round(rate_simpy),
        "ratio_vs_simpy": round(rate / rate_simpy, 3),
        "ratio_traced_vs_simpy": round(rate_traced / rate_simpy, 3),
        "deliveries": plain[0][0],
        "simpy_deliveries": simpy_runs[0][0],
        "span_s": span / S,
        "ring": RING,
        "in_flight": IN_FLIGHT,
    }
