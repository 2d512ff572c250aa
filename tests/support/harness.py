"""Build small kernels for tests without scenario files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.actor import Actor
from emulator.kernel import Kernel, KernelOptions
from emulator.net.network import build_network
from emulator.net.specs import NetworkSpec, RegionSpec
from emulator.rng import RngStreams
from emulator.trace import TraceEvent, Tracer

REGIONS = ("east", "west", "south")


def regions(*names: str, machines: int = 2) -> list[RegionSpec]:
    return [RegionSpec(name=n, machines=machines, racks=2, fault_domains=2) for n in names]


def make_kernel(
    *,
    seed: int = 1,
    names: tuple[str, ...] = REGIONS,
    store: Any = None,
    writer: Any = None,
    options: KernelOptions | None = None,
    network: NetworkSpec | None = None,
) -> Kernel:
    rng = RngStreams(seed)
    net = build_network(regions(*names), network or NetworkSpec(), rng)
    return Kernel(
        seed=seed,
        rng=rng,
        network=net,
        tracer=Tracer(writer),
        store=store,
        options=options or KernelOptions(restart_delay_us=1_000_000),
    )


def spawn(
    kernel: Kernel, cls: type[Actor], address: str, host: str, params: Any = None, at_us: int = 0
) -> None:
    kernel.spawn(address, host, lambda: cls(address, params), at_us=at_us)


def record(kernel: Kernel, *kinds: str) -> list[TraceEvent]:
    """Collect decoded trace events of the given kinds as they happen."""
    seen: list[TraceEvent] = []
    for kind in kinds:
        kernel.tracer.subscribe(kind, seen.append)
    return seen


def only(events: list[TraceEvent], pred: Callable[[TraceEvent], bool]) -> list[TraceEvent]:
    return [e for e in events if pred(e)]
