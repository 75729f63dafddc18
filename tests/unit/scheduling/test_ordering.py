"""Pending order: priority, then the queue's fair share, then age, then id."""

from __future__ import annotations

from federation.scheduling.cycle import schedule
from federation.scheduling.framework import SchedulerConfig
from federation.scheduling.ordering import ordered

from .builders import H100, cluster, job, pool, queue, snapshot


def ids(jobs: list) -> list[str]:  # type: ignore[type-arg]
    return [j.id for j in jobs]


def test_priority_then_share_then_age_then_id() -> None:
    jobs = [
        job("late", queue="rich", created_at=5),
        job("vip", queue="rich", priority=9, created_at=9),
        job("poor-old", queue="poor", created_at=1),
        job("poor-b", queue="poor", created_at=2),
        job("poor-a", queue="poor", created_at=2),
    ]
    shares = {"rich": 0.5, "poor": 0.1}
    assert ids(ordered(jobs, shares.__getitem__)) == ["vip", "poor-old", "poor-a", "poor-b", "late"]


def test_fair_share_alternates_between_queues_as_the_cycle_places_jobs() -> None:
    queues = [queue("x", {H100: 8000}, cohort="c"), queue("y", {H100: 8000}, cohort="c")]
    snap = snapshot([cluster("a", pool("a", 1))], queues)
    jobs = [job(f"x{i}", H100, queue="x", created_at=i) for i in range(4)]
    jobs += [job(f"y{i}", H100, queue="y", created_at=10 + i) for i in range(4)]
    result = schedule(snap, jobs, now=0)
    # Age alone would place x0..x3 first; fair share interleaves the queues.
    assert [p.placement.job.id for p in result.placed] == [
        "x0",
        "y0",
        "x1",
        "y1",
        "x2",
        "y2",
        "x3",
        "y3",
    ]


def test_priority_aging_lifts_old_jobs() -> None:
    snap = snapshot([cluster("a", pool("a", 1))])
    jobs = [
        job("new-hi", H100, count=8, priority=2, created_at=100),
        job("old", H100, count=8, created_at=0),
    ]
    aged = SchedulerConfig(priority_aging_s=30)  # 100 s waited: +3
    assert [p.placement.job.id for p in schedule(snap, jobs, now=100, config=aged).placed] == [
        "old"
    ]
    assert [p.placement.job.id for p in schedule(snap, jobs, now=100).placed] == ["new-hi"]
