"""Working state: trials undo every change, kept trials stay, reservations hold capacity."""

from __future__ import annotations

from dataclasses import replace

import pytest

from federation.scheduling.devices import DeviceConflict
from federation.scheduling.model import Placement, ReplicaPlacement
from federation.scheduling.state import State

from .builders import H100, cluster, job, pool, snapshot


def test_trial_undoes_evictions_placements_and_holds() -> None:
    low = job("low", H100, count=4)
    state = State(snapshot([cluster("a", pool("a", 1))], running=[(low, "a")]))
    before = state.fingerprint()
    new = Placement(
        job("new", H100, count=4), "a", (H100,), (ReplicaPlacement(0, "a-0", (4, 5, 6, 7)),)
    )
    with state.trial():
        state.evict(state.placements["low"])
        state.place(new)
        held = Placement(
            job("vip", H100, count=2), "a", (H100,), (ReplicaPlacement(0, "a-0", (0, 1)),)
        )
        state.hold(held)
        state.mark_preempting("low")
        with state.trial() as inner:
            state.unhold("nobody")
            inner.keep()
        assert state.fingerprint() != before
    assert state.fingerprint() == before


def test_kept_trial_stays_and_index_follows() -> None:
    state = State(snapshot([cluster("a", pool("a", 1))]))
    index = state.clusters["a"].flavors[H100]
    new = Placement(
        job("new", H100, count=3), "a", (H100,), (ReplicaPlacement(0, "a-0", (0, 1, 2)),)
    )
    with state.trial() as trial:
        state.place(new)
        trial.keep()
    assert (index.free, index.largest_free(), index.used_milli) == (5, 5, 3000)
    assert state.quota.usage["q"][H100] == 3000


def test_place_on_taken_devices_raises_and_changes_nothing() -> None:
    state = State(
        snapshot([cluster("a", pool("a", 1))], running=[(job("low", H100, count=2), "a")])
    )
    before = state.fingerprint()
    clash = Placement(job("x", H100, count=2), "a", (H100,), (ReplicaPlacement(0, "a-0", (1, 2)),))
    with pytest.raises(DeviceConflict):
        state.place(clash)
    assert state.fingerprint() == before


def test_reservation_holds_capacity_except_for_its_holder() -> None:
    held = Placement(
        job("vip", H100, count=8), "a", (H100,), (ReplicaPlacement(0, "a-0", tuple(range(8))),)
    )
    snap = snapshot([cluster("a", pool("a", 1))])
    state = State(type(snap)(snap.clusters, snap.queues, (), (held,)))
    assert state.clusters["a"].flavors[H100].free == 0
    with state.trial():
        state.unhold("vip")
        assert state.clusters["a"].flavors[H100].free == 8
    assert state.clusters["a"].flavors[H100].free == 0


def test_a_hold_of_nothing_is_still_a_hold_after_an_undone_trial() -> None:
    """A reservation whose devices are all taken (by a running job here, by a pod outside the
    hub in life) holds nothing, but its job still holds: undoing `unhold` must not lose it
    (a job without a hold may be parked, and a parked preemptor is never tried again)."""
    low = job("low", H100, count=8)
    promised = Placement(
        job("vip", H100, count=4), "a", (H100,), (ReplicaPlacement(0, "a-0", (0, 1, 2, 3)),)
    )
    snap = snapshot([cluster("a", pool("a", 1))], running=[(low, "a")])
    state = State(replace(snap, reservations=(promised,)))
    assert state.held == {"vip": []} and state.awaiting == {"vip"}
    before = state.fingerprint()
    with state.trial():
        state.unhold("vip")
        assert "vip" not in state.held
        with state.trial():
            state.hold(promised)  # collides again: held, still nothing
            assert state.held == {"vip": []}
        assert "vip" not in state.held
    assert state.fingerprint() == before and state.held == {"vip": []}


def test_running_placements_are_accounted_in_bulk_as_one_by_one() -> None:
    running = [(job(f"r{i}", H100, count=2, priority=i % 2), "a") for i in range(4)]
    snap = snapshot([cluster("a", pool("a", 2))], running=running)
    bulk = State(snap)
    single = State(replace(snap, placements=()))
    for placement in snap.placements:
        single._account(placement, 1)
    assert bulk.quota.usage == single.quota.usage
    assert (bulk.running.where, bulk.preemptible) == (single.running.where, single.preemptible)
    assert (bulk.by_cluster, bulk.by_queue, bulk.by_flavor) == (
        single.by_cluster,
        single.by_queue,
        single.by_flavor,
    )
