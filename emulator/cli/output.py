"""What the CLI prints about a run: its exit codes, a progress bar and the summary."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from typing import Any

from emulator.units import format_us

EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
# The run reached its end (`duration` or `--until`) before its system's work
# was done (a cluster trace with jobs left): clean, but its figures are partial.
EXIT_CUT_SHORT = 3


def run_exit_code(result: Any) -> int:
    """`run`'s and `resume`'s exit code for a run that went to its end or was stopped."""
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    if result.failed:
        return EXIT_VIOLATION
    return EXIT_CUT_SHORT if getattr(result, "cut_short", False) else EXIT_OK


class Progress:
    """A rich progress bar on stderr (emulated time, events/s), or nothing."""

    def __init__(self, show: bool, end_us: int) -> None:
        self.show = show
        self.end_us = end_us
        self.bar: Any = None

    def __enter__(self) -> Callable[[Any], None] | None:
        if not self.show:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("[bold]emulated[/] {task.fields[now]}"),
            BarColumn(),
            TextColumn("{task.percentage:>5.1f}%  {task.fields[rate]} events/s"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.bar.start()
        task = self.bar.add_task("run", total=max(1, self.end_us), now="0s", rate="-")
        import time

        start = time.perf_counter()

        def update(kernel: Any) -> None:
            elapsed = max(1e-9, time.perf_counter() - start)
            self.bar.update(
                task,
                completed=kernel.now_us,
                now=format_us(kernel.now_us),
                rate=f"{kernel.events / elapsed:,.0f}",
            )

        return update

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def actor_error_lines(errors: Sequence[Any], status: str, shown_max: int = 5) -> list[str]:
    """The actors that died on exceptions of their own, first ones first.

    A run whose status is not "error" tolerated every one of them (the
    scenario's `invariants.tolerate_errors`); they are listed all the same.
    """
    if not errors:
        return []
    what = "ACTOR ERROR" if status == "error" else "actor error (tolerated)"
    lines = [
        f"{what} at #{e.seq} ({format_us(e.t_us)}): {e.address} died on {e.error}: {e.message}"
        for e in errors[:shown_max]
    ]
    if len(errors) > shown_max:
        lines.append(f"… and {len(errors) - shown_max} more actor error(s)")
    return lines


def print_summary(
    result: Any, ref: str, system: Sequence[tuple[str, str]] = (), stuck: Sequence[str] = ()
) -> None:
    """The end of `run` and `resume`, for a person: how the run went, what its system did
    (`system`: the reporter's `summary` rows), the work that never ran after the final
    heal (`stuck`: liveness lines), what to run next, and last the trace hash
    (`trace-hash: HEX`, which tools parse)."""
    # "events" are trace events, as replay/check/export count them; "steps" are
    # the kernel's heap events (a delivery is one of each; a store write only a trace event).
    rate = result.trace_events / result.wall_s if result.wall_s > 0 else 0.0
    bugs = len(result.actor_errors)
    rows = [
        ("status", result.status),
        ("emulated", format_us(result.end_t_us)),
        *system,
        ("violations", f"{len(result.violations):,}"),
        ("actor crashes", f"{result.crashes:,} ({bugs:,} on a bug of the actor's own)"),
        ("fault windows", f"{len(result.fault_windows)}"),
        ("events", f"{result.trace_events:,} ({rate:,.0f}/s wall)"),
        ("kernel steps", f"{result.events:,}"),
        ("deliveries", f"{result.deliveries:,} ({result.drops:,} dropped)"),
        ("wall time", f"{result.wall_s:.2f}s"),
    ]
    if result.lag_s_max is not None:
        rows.append(("max lag", f"{result.lag_s_max * 1000:.1f}ms"))
    rows.append(("run database", str(result.out)))
    for key, value in rows:
        print(f"{key:>14}: {value}")
    for seq, t_us, invariant, message in result.violations[:20]:
        print(f"VIOLATION {invariant} at #{seq} ({format_us(t_us)}): {message}")
    for line in actor_error_lines(result.actor_errors, result.status):
        print(line)
    for line in stuck:
        print(line)
    if getattr(result, "cut_short", False):
        print(
            f"CUT SHORT at {format_us(result.end_t_us)}: the run ended before its work was "
            "done (jobs left unfinished); raise `duration` (or --until) for complete figures"
        )
    if result.failed:
        print(f"reproduce: mastemu run {ref} --seed {result.seed}")
    db = shlex.quote(str(result.out))
    print(f"next: mastemu report {db}    (metrics; --html DIR for plots)")
    print(f"      mastemu check {db}     (invariants again, and liveness)")
    print(f"      mastemu export {db} --format chrome --out trace.json    (Perfetto)")
    print(f"trace-hash: {result.trace_hash}")
