"""The contract between MAST-level scheduling policies and the control plane that runs them.

The GMS, the RMSs, the CMs and the job agents keep the protocol whatever
the policy (ranked scan passes, auctions with deadlines, fenced awards, gang
dispatch, checkpoints). A MAST-level policy decides the three things that
differ between ways of scheduling over regions:

- queue ordering (the GMS, once per scan pass): the dispatch order of the
  queued workloads, given MAST's ranking — ⟨priority, credit⟩ after the
  quota scan (`actors/policies/mast/ranking.py`), which every registered policy
  keeps; a policy may only permute it, and each row keeps its priority and
  credit for the record.
- routing (the GMS, once per scan pass, after ranking): which regions' RMSs
  are asked to bid for each queued workload. MAST's late binding asks every
  region; the federated baseline (§5.6) binds each new workload to one
  region and asks only that one. The policy's state (the federated
  bindings) goes in and the next one comes out; a new GMS leader starts
  again from `initial_state`, as a restarted one does.
- placement (an RMS, per auction): the plan for a workload over the
  region's dynamic clusters, victims to preempt included, scored by
  P_score — or `Unschedulable`.
- the slow path (the system, when a run is built): the Tetris and
  migration settings in force; the `tetris-v*` policies are MAST with
  Tetris on at that version.

Policies are found by name in `actors/policies/mast/registry.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import msgspec

from actors.policies.mast.migration import MigrationSettings
from actors.policies.mast.placement.place import place_workload
from actors.policies.mast.placement.snapshot import (
    ClusterSnapshot,
    JobRequest,
    Unschedulable,
    WorkloadPlan,
)
from actors.policies.mast.quota import Row
from actors.policies.mast.tetris.settings import TetrisSettings
from store.mast.records import QueueEntry, WorkloadSpec

__all__ = [
    "MastDefaults",
    "MastPolicy",
    "NoParams",
    "Routing",
    "RoutingView",
]


class NoParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Parameters of a policy that has none: any key given is an error."""


class RoutingView(msgspec.Struct, frozen=True, kw_only=True):
    """What the GMS knows at a scan pass, for routing.

    `queued` are the workloads about to be auctioned, `active` those
    dispatching or running (with their `region`), both as the store returned
    them. `specs` holds the spec of each of them and is read-only. `supply`
    is hardware type (None: CPU machines) -> region -> GPUs (or CPU
    machines) there; it is filled only for a policy with `reads_supply`.
    """

    now_us: int
    regions: tuple[str, ...]
    queued: tuple[QueueEntry, ...]
    active: tuple[QueueEntry, ...]
    specs: Mapping[str, WorkloadSpec]
    supply: Mapping[str | None, Mapping[str, float]] = {}


class Routing(msgspec.Struct, frozen=True, kw_only=True):
    """Where each queued workload's auction goes, and what to record of the choice.

    A workload missing from `targets` is auctioned to every region; an
    empty tuple asks no region (the workload waits). `notes` are
    (decision type, payload) pairs the GMS puts in the trace, in order.
    """

    targets: Mapping[str, tuple[str, ...]] = {}
    notes: tuple[tuple[str, Any], ...] = ()


class MastPolicy(Protocol):
    """A named MAST-level policy with validated parameters and explicit state.

    `name` is what `[system] policy = "…"` names; `Params` is a msgspec Struct
    (given under `[system.policy_params.NAME]`, defaults otherwise).
    `reads_supply` asks the GMS for the regions' hardware at start (it costs
    a store read, so only a policy that uses it asks). Every method must be
    pure: the same inputs give the same outputs.
    """

    name: str
    Params: type[msgspec.Struct]
    reads_supply: bool

    def slow_path(
        self, tetris: TetrisSettings, migration: MigrationSettings, params: Any
    ) -> tuple[TetrisSettings, MigrationSettings]:
        """The slow path's settings for a run, from the scenario's."""
        ...

    def order(self, ranked: Sequence[Row], params: Any) -> Sequence[Row]:
        """This pass's dispatch order: a permutation of MAST's ranking `ranked`."""
        ...

    def initial_state(self, params: Any) -> Any:
        """The routing state of a GMS that has just started leading."""
        ...

    def route(self, view: RoutingView, state: Any, params: Any) -> tuple[Routing, Any]:
        """Where this pass's auctions go, and the next routing state."""
        ...

    def place(
        self,
        clusters: Sequence[ClusterSnapshot],
        jobs: Sequence[JobRequest],
        now_us: int,
        params: Any,
    ) -> WorkloadPlan | Unschedulable:
        """An RMS's plan for one workload's jobs over its clusters (victims included)."""
        ...


class MastDefaults:
    """MAST's own answers, for a policy to inherit and override in part.

    The scenario's slow path as written, MAST's ranking as the dispatch
    order, no routing state, every auction to every region, and the P_score
    placement of `actors/policies/mast/placement/place.py`.
    """

    Params: type[msgspec.Struct] = NoParams
    reads_supply: bool = False

    def slow_path(
        self, tetris: TetrisSettings, migration: MigrationSettings, params: Any
    ) -> tuple[TetrisSettings, MigrationSettings]:
        del params
        return tetris, migration

    def order(self, ranked: Sequence[Row], params: Any) -> Sequence[Row]:
        del params
        return ranked

    def initial_state(self, params: Any) -> Any:
        del params
        return None

    def route(self, view: RoutingView, state: Any, params: Any) -> tuple[Routing, Any]:
        del view, params
        return Routing(), state

    def place(
        self,
        clusters: Sequence[ClusterSnapshot],
        jobs: Sequence[JobRequest],
        now_us: int,
        params: Any,
    ) -> WorkloadPlan | Unschedulable:
        del params
        return place_workload(clusters, jobs, now_us)
