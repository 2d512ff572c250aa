"""Leader election by leases: epochs, renewal, expiry, fencing, the in-memory view."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import Store, leases
from store.events import event_name
from store.leases import Lease, LeaseGrant
from tests.support.examples import examples

ROLE = "rms/us-east"
TTL = 10_000_000  # 10 s


async def test_first_acquire_is_epoch_1_and_renew_keeps_epoch(store: Store) -> None:
    first = await leases.acquire(store, ROLE, "rms/us-east/0", 0, TTL)
    assert first == Lease(ROLE, "rms/us-east/0", 1, TTL)
    renewed = await leases.acquire(store, ROLE, "rms/us-east/0", 4_000_000, TTL)
    assert renewed == Lease(ROLE, "rms/us-east/0", 1, 14_000_000)
    assert await leases.get(store, ROLE) == renewed
    assert await leases.history(store) == [LeaseGrant(ROLE, 1, "rms/us-east/0", 0)]


async def test_other_candidate_blocked_until_expiry_then_epoch_2(store: Store) -> None:
    await leases.acquire(store, ROLE, "a", 0, TTL)
    assert await leases.acquire(store, ROLE, "b", 1, TTL) is None
    assert await leases.acquire(store, ROLE, "b", TTL - 1, TTL) is None
    # Valid while now < expires_at_us: at exactly TTL the lease is free.
    taken = await leases.acquire(store, ROLE, "b", TTL, TTL)
    assert taken == Lease(ROLE, "b", 2, 2 * TTL)
    # The deposed holder cannot renew its old lease.
    assert await leases.acquire(store, ROLE, "a", TTL + 1, TTL) is None
    assert await leases.history(store, ROLE) == [
        LeaseGrant(ROLE, 1, "a", 0),
        LeaseGrant(ROLE, 2, "b", TTL),
    ]


async def test_expired_holder_reacquires_with_new_epoch(store: Store) -> None:
    await leases.acquire(store, ROLE, "a", 0, TTL)
    again = await leases.acquire(store, ROLE, "a", TTL + 5, TTL)
    assert again is not None and again.epoch == 2


async def test_a_restarted_holder_takes_its_valid_lease_as_a_new_epoch(store: Store) -> None:
    await leases.acquire(store, ROLE, "a", 0, TTL)
    # Restarted within its TTL: a new term (what it led, it no longer remembers).
    again = await leases.acquire(store, ROLE, "a", 1_000_000, TTL, True)
    assert again == Lease(ROLE, "a", 2, 1_000_000 + TTL)
    assert await leases.acquire(store, ROLE, "a", 2_000_000, TTL) == Lease(ROLE, "a", 2, 12_000_000)
    # Someone else's valid lease stays theirs, fresh or not.
    assert await leases.acquire(store, ROLE, "b", 3_000_000, TTL, True) is None
    assert [g.epoch for g in await leases.history(store, ROLE)] == [1, 2]


async def test_roles_are_independent(store: Store) -> None:
    assert (await leases.acquire(store, "gms", "gms/0", 0, TTL)) is not None
    got = await leases.acquire(store, ROLE, "gms/0", 0, TTL)
    assert got is not None and got.epoch == 1
    assert [g.role for g in await leases.history(store)] == ["gms", ROLE]


async def test_release_frees_the_role_at_once(store: Store) -> None:
    await leases.acquire(store, ROLE, "a", 0, TTL)
    assert not await leases.release(store, ROLE, "a", 2, 5)  # wrong epoch
    assert not await leases.release(store, ROLE, "b", 1, 5)  # wrong holder
    assert store.leases.leader_of(ROLE, 5) == "a"
    assert await leases.release(store, ROLE, "a", 1, 5)
    assert store.leases.leader_of(ROLE, 5) is None
    assert not await leases.fenced_effect(store, ROLE, "a", 1, 5, b"late")
    taken = await leases.acquire(store, ROLE, "b", 5, TTL)
    assert taken is not None and taken.epoch == 2


async def test_fenced_effect(store: Store) -> None:
    await leases.acquire(store, ROLE, "a", 0, TTL)
    assert await leases.fenced_effect(store, ROLE, "a", 1, 100, b"award w1")
    # Expired lease: rejected even for the holder of the latest epoch.
    assert not await leases.fenced_effect(store, ROLE, "a", 1, TTL, b"expired")
    await leases.acquire(store, ROLE, "b", TTL, TTL)
    # Deposed holder with its old epoch, and with the new epoch it never held.
    assert not await leases.fenced_effect(store, ROLE, "a", 1, TTL + 1, b"late")
    assert not await leases.fenced_effect(store, ROLE, "a", 2, TTL + 1, b"forged")
    # Current holder with a stale epoch, then with its own.
    assert not await leases.fenced_effect(store, ROLE, "b", 1, TTL + 1, b"stale")
    assert await leases.fenced_effect(store, ROLE, "b", 2, TTL + 1, b"award w2")
    assert not await leases.fenced_effect(store, "gms", "b", 2, TTL + 1, b"other role")
    effects = await leases.effects(store, ROLE)
    assert [(e.holder, e.epoch, e.t_us, e.payload) for e in effects] == [
        ("a", 1, 100, b"award w1"),
        ("b", 2, TTL + 1, b"award w2"),
    ]


async def test_lease_view_mirrors_commits(store: Store, db_path: Path) -> None:
    view = store.leases
    assert view.get(ROLE) is None and view.leader_of(ROLE, 0) is None
    await leases.acquire(store, ROLE, "a", 0, TTL)
    assert view.get(ROLE) == Lease(ROLE, "a", 1, TTL)
    assert view.leader_of(ROLE, TTL - 1) == "a"
    assert view.leader_of(ROLE, TTL) is None  # expired
    # A refused acquire changes nothing.
    assert await leases.acquire(store, ROLE, "b", 1, TTL) is None
    assert view.get(ROLE) == Lease(ROLE, "a", 1, TTL)
    await leases.acquire(store, ROLE, "a", 5, TTL)
    assert view.get(ROLE) == await leases.get(store, ROLE)
    # A fresh Store loads the view from the table.
    async with Store.open_ctx(db_path) as again:
        assert again.leases.get(ROLE) == view.get(ROLE)
        assert again.leases.roles() == [ROLE]


async def test_two_connections_one_leader(db_path: Path) -> None:
    # Two writers on one file (not how a run works, but the CAS must hold).
    async with Store.open_ctx(db_path) as s1, Store.open_ctx(db_path) as s2:
        a, b = await asyncio.gather(
            leases.acquire(s1, ROLE, "a", 0, TTL), leases.acquire(s2, ROLE, "b", 0, TTL)
        )
        assert (a is None) != (b is None)
        assert len(await leases.history(s1, ROLE)) == 1


def test_store_event_names() -> None:
    assert event_name(leases.acquire) == "lease.acquire"
    assert event_name(leases.release) == "lease.release"
    assert event_name(leases.fenced_effect) == "lease.effect"
    assert event_name(leases.get) is None


# -- property: random interleavings of three candidates -----------------------

CANDIDATES = ("c0", "c1", "c2")
OPS = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "acquire", "effect", "effect", "release"]),
        st.sampled_from(CANDIDATES),
        st.integers(0, 30),  # time step, µs: zero steps make same-instant races
        st.integers(1, 40),  # ttl, µs
        st.sampled_from([0, 0, 0, -1, 1]),  # epoch skew: a stale or forged epoch
    ),
    max_size=40,
)


async def run_interleaving(ops: list[tuple[str, str, int, int, int]]) -> None:
    async with Store.open_ctx(":memory:") as s:
        now = 0
        believed: dict[str, int] = {}  # the epoch each candidate last obtained
        holder_of_epoch: dict[int, str] = {}
        model: Lease | None = None  # reference model of the lease row
        for op, cand, dt, ttl, skew in ops:
            now += dt
            valid = model is not None and now < model.expires_at_us
            if op == "acquire":
                got = await leases.acquire(s, ROLE, cand, now, ttl)
                if not valid:
                    epoch = model.epoch + 1 if model else 1
                    model = Lease(ROLE, cand, epoch, now + ttl)
                    assert got == model
                elif model is not None and model.holder == cand:
                    model = Lease(ROLE, cand, model.epoch, now + ttl)
                    assert got == model
                else:
                    assert got is None
                if got is not None:
                    # Never two holders for one epoch.
                    assert holder_of_epoch.setdefault(got.epoch, cand) == cand
                    believed[cand] = got.epoch
            elif op == "effect":
                epoch = believed.get(cand, 1) + skew
                ok = await leases.fenced_effect(s, ROLE, cand, epoch, now, b"x")
                if ok:
                    # Only the latest granted epoch, by its holder, unexpired.
                    assert epoch == max(holder_of_epoch)
                    assert holder_of_epoch[epoch] == cand
                    assert model is not None and now < model.expires_at_us
                current = model is not None and (model.holder, model.epoch) == (cand, epoch)
                assert ok == (valid and current)
            else:
                epoch = believed.get(cand, 1)
                ok = await leases.release(s, ROLE, cand, epoch, now)
                matches = model is not None and (model.holder, model.epoch) == (cand, epoch)
                assert ok == matches
                if matches and model is not None:
                    model = Lease(ROLE, cand, epoch, min(model.expires_at_us, now))
            assert s.leases.get(ROLE) == model
        history = await leases.history(s, ROLE)
        assert [g.epoch for g in history] == list(range(1, len(history) + 1))
        assert {g.epoch: g.holder for g in history} == holder_of_epoch
        assert await leases.get(s, ROLE) == model


@settings(max_examples=examples(75), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_interleavings_keep_one_holder_per_epoch_and_fence(
    ops: list[tuple[str, str, int, int, int]],
) -> None:
    asyncio.run(run_interleaving(ops))


async def test_the_holder_back_at_the_instant_of_expiry_takes_a_new_epoch(store: Store) -> None:
    await leases.acquire(store, ROLE, "a", 0, TTL)
    # At exactly TTL the lease is over: its holder, back then, starts epoch 2.
    again = await leases.acquire(store, ROLE, "a", TTL, TTL)
    assert again == Lease(ROLE, "a", 2, 2 * TTL)
    assert await leases.get(store, ROLE) == again
    assert await leases.fenced_effect(store, ROLE, "a", 2, TTL + 1, b"x")


async def test_the_seeded_bug_renews_at_expiry_in_the_view_but_not_the_database(
    store: Store,
) -> None:
    # `lease-renews-at-expiry` (the bug zoo): the view moves on, the row stays
    # expired, and the holder's fenced writes are refused from then on.
    store.seed_bugs(frozenset({leases.RENEWS_AT_EXPIRY}))
    await leases.acquire(store, ROLE, "a", 0, TTL)
    renewed = await leases.acquire(store, ROLE, "a", TTL, TTL)
    assert renewed == Lease(ROLE, "a", 1, 2 * TTL)
    assert store.leases.leader_of(ROLE, TTL + 1) == "a"
    assert await leases.get(store, ROLE) == Lease(ROLE, "a", 1, TTL)
    assert not await leases.fenced_effect(store, ROLE, "a", 1, TTL + 1, b"x")
    # A follower asking the view sees a valid leader and never asks the store.
    assert await leases.acquire(store, ROLE, "b", TTL + 1, TTL) is None
    # Once the view's lease is over too, the next candidate finds the row expired.
    store.seed_bugs(frozenset())
    assert await leases.acquire(store, ROLE, "c", 3 * TTL, TTL) == Lease(ROLE, "c", 2, 4 * TTL)
