"""A preemptor's hold on what its victims free lasts until they must be gone, plus a margin."""

from __future__ import annotations

from dataclasses import replace

from federation.controllers.carried import Carried
from federation.scheduling.cycle import schedule
from federation.scheduling.decisions import CycleResult
from federation.scheduling.model import Job, Snapshot
from federation.spec import DEFAULT_GRACE_SECONDS

from .builders import H100, cluster, job, pool, snapshot

URGENT = job("urgent", H100, count=8, priority=9)
PENDING = {"urgent"}


def _victims(result: CycleResult) -> list[str]:
    return sorted(v.job.id for p in result.preempted for v in p.victims)


class Loop:
    """The hub's loop without its I/O: what it carries between cycles, and the core."""

    def __init__(self, margin_s: float, urgent: Job = URGENT) -> None:
        self.carried = Carried(margin_s)
        self.holds = self.carried.holds
        self.urgent = urgent

    def cycle(self, snap: Snapshot, now: float) -> CycleResult:
        """One cycle as the loop runs it (every cycle written)."""
        held, parked, _ = self.carried.begin(snap, PENDING, now)
        result = schedule(held, [self.urgent], now=now, parked=parked)
        self.carried.written(result, now, PENDING)
        return result


def test_a_hold_whose_capacity_something_else_took_is_released_after_the_victims_grace() -> None:
    """Two low jobs fill half a node each; the urgent job evicts one (grace 20 s) and holds
    its devices. The victim leaves, but something outside the hub takes its devices: the
    cluster still reports them used. Until the grace period and the margin are past, the
    urgent job waits and evicts nothing more (its hold is short, and it is tried every cycle,
    never parked); then the hold is dropped and it evicts the other low job instead of
    waiting for ever."""
    lows = [replace(job(f"low-{i}", H100, count=4), grace_s=20) for i in (1, 2)]
    snap = snapshot([cluster("a", pool("a", 1))], running=[(j, "a") for j in lows])
    loop = Loop(margin_s=60, urgent=job("urgent", H100, count=4, priority=9))
    first = loop.cycle(snap, now=0)
    (victim,) = _victims(first)
    taken = replace(snap, placements=tuple(p for p in snap.placements if p.job.id != victim))
    for now in (1, 40, 80):
        waiting = loop.cycle(taken, now)
        assert not waiting.preempted and not waiting.placed and len(loop.holds) == 1
        assert waiting.parked is None  # a preemptor holding capacity is tried every cycle
    last = loop.cycle(taken, now=81)
    assert _victims(last) == sorted({"low-1", "low-2"} - {victim})
    assert len(loop.holds) == 1  # the new preemption holds the other node


def test_a_hold_lasts_the_longest_grace_of_what_the_preemption_deletes() -> None:
    """Victims naming no grace period get the agents' default; the longest one counts."""
    lows = [job("low-1", H100, count=4), replace(job("low-2", H100, count=4), grace_s=5)]
    snap = snapshot([cluster("a", pool("a", 1))], running=[(j, "a") for j in lows])
    loop = Loop(margin_s=10)
    result = loop.cycle(snap, now=100)
    assert _victims(result) == ["low-1", "low-2"]
    assert not loop.holds.expire(100 + DEFAULT_GRACE_SECONDS + 10)
    (hold,) = loop.holds.expire(100 + DEFAULT_GRACE_SECONDS + 10.5)
    assert hold.reservation.job.id == "urgent" and len(loop.holds) == 0


def test_a_placed_or_vanished_preemptor_holds_nothing() -> None:
    low = job("low", H100, count=8)
    snap = snapshot([cluster("a", pool("a", 1))], running=[(low, "a")])
    loop = Loop(margin_s=60)
    first = loop.cycle(snap, now=0)
    assert _victims(first) == ["low"] and loop.holds.reservations(PENDING)
    gone = snapshot([cluster("a", pool("a", 1))])
    placed = loop.cycle(gone, now=1)
    assert [p.placement.job.id for p in placed.placed] == ["urgent"] and len(loop.holds) == 0
    loop.cycle(snap, now=2)
    loop.holds.settle(CycleResult(), now=3, pending=set())  # cancelled meanwhile
    assert len(loop.holds) == 0


def test_a_shrink_holds_for_the_grace_of_the_replicas_it_removes() -> None:
    elastic = replace(job("e", H100, count=2, replicas=4, elastic=(1, 4), priority=1), grace_s=50)
    snap = snapshot([cluster("a", pool("a", 1))], running=[(elastic, "a")])
    loop = Loop(margin_s=10, urgent=job("urgent", H100, count=4, priority=9))
    result = loop.cycle(snap, now=0)
    assert [r.counts for p in result.preempted for r in p.shrunk] == [{"main": (4, 2)}]
    assert not loop.holds.expire(60) and len(loop.holds.expire(60.5)) == 1
