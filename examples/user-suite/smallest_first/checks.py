"""The promise `SmallestFirst` makes, judged from the trace: a small job is never passed over.

`smallest-first-order`: no job starts while a job asking fewer GPUs is left
waiting. Read from events every run stores (whatever its trace level): the
RMS's `queue.submit` store writes (a job becomes waiting once the scheduler
has it), and its `cluster.decision` decisions (which jobs it starts). A job
the scheduler preempts is not waited for again: this invariant is meant for
policies that do not preempt.

Fed the same events online (during `mastemu run`) and offline (`mastemu
check RUN.db`), so both say the same.
"""

from __future__ import annotations

from actors.extend import TraceEvent, named


class SmallestFirstOrder:
    name = "smallest-first-order"
    kinds = ("store", "decision")

    def __init__(self) -> None:
        self.waiting: dict[str, int] = {}  # job -> GPUs it asks for

    def observe(self, event: TraceEvent) -> list[str]:
        if event.type == "queue.submit":
            e = named(event)
            if e.result:
                self.waiting[e.spec["id"]] = sum(j["gpus"] for j in e.spec["jobs"])
            return []
        if event.type != "cluster.decision":
            return []
        started = [j for j in named(event).start if j in self.waiting]
        left = {j: g for j, g in self.waiting.items() if j not in started}
        problems = []
        if left:
            smallest = min(left, key=lambda j: (left[j], j))
            for job in started:
                if left[smallest] < self.waiting[job]:
                    problems.append(
                        f"{job} ({self.waiting[job]} GPUs) started while {smallest} "
                        f"({left[smallest]} GPUs) waited"
                    )
        self.waiting = left
        return problems

    def finish(self) -> list[str]:
        return []
