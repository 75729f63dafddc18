"""Plugin details: taints, node readiness, registry errors, reasons with numbers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.core_throughput import build
from federation.scheduling import DEFAULT_CONFIG
from federation.scheduling.cycle import schedule
from federation.scheduling.framework import SchedulerConfig
from federation.scheduling.model import Constraints, Taint
from federation.scheduling.plugins import DEFAULT_REGISTRY
from federation.scheduling.status import Code

from .builders import H100, cluster, job, node, pool, snapshot
from .test_elastic import elastic


def test_untolerated_taints_keep_jobs_off_nodes_and_are_unresolvable() -> None:
    tainted = replace(node("t"), taints=(Taint("dedicated", "infer"),))
    snap = snapshot([cluster("a", [tainted])])
    result = schedule(snap, [job("j", H100)], now=0)
    status = result.rejected[0].reasons["a"]
    assert status.code is Code.UNRESOLVABLE and "untolerated taints ['dedicated']" in status.reason
    tolerant = job("k", H100, constraints=Constraints(tolerations=("dedicated",)))
    assert schedule(snap, [tolerant], now=0).placed


def test_prefer_no_schedule_taints_do_not_block() -> None:
    soft = replace(node("s"), taints=(Taint("spot", effect="PreferNoSchedule"),))
    assert schedule(snapshot([cluster("a", [soft])]), [job("j", H100)], now=0).placed


def test_nodes_not_ready_hold_nothing_now_but_count_for_the_empty_check() -> None:
    snap = snapshot([cluster("a", [node("down", ready=False), node("up")])])
    result = schedule(snap, [job("j", H100, count=8, replicas=2)], now=0)
    assert result.pending[0].reasons["a"].code is Code.UNSCHEDULABLE
    assert result.pending[0].reasons["a"].reason == "needs 16x nvidia/H100-80GB at once, 8 free"


def test_unknown_plugin_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown scheduler plugins: nope"):
        DEFAULT_REGISTRY.profile(SchedulerConfig(score_weights={"nope": 1.0}))


def test_filters_can_be_switched_off() -> None:
    snap = snapshot([cluster("down", pool("d", 1), ready=False)])
    config = SchedulerConfig(cluster_filters=("constraints",))
    assert schedule(snap, [job("j", H100)], now=0, config=config).placed


def test_placed_result_explains_its_scores() -> None:
    result = schedule(snapshot([cluster("a", pool("a", 1))]), [job("j", H100)], now=0)
    placed = result.placed[0]
    assert set(placed.scores) == {
        "packing",
        "performance",
        "locality",
        "retry",
        "live_load",
        "growth_room",
        "total",
    }
    assert placed.scores["growth_room"] == 0  # a fixed job cannot grow: 0 everywhere
    assert placed.reason.startswith("a: score ")


def test_bench_snapshot_schedules_at_small_scale() -> None:
    snap, pending = build(clusters=2, nodes=40, pending=150)
    result = schedule(snap, pending, now=0)
    decided = len(result.placed) + len(result.preempted) + len(result.pending)
    assert decided + len(result.rejected) == 150 and result.placed


def test_an_unaccepted_cluster_gets_no_work_while_an_accepted_one_does() -> None:
    pending = cluster("pending", pool("p", 4), accepted=False)
    snap = snapshot([pending, cluster("accepted", pool("a", 1))])
    result = schedule(snap, [job(f"j{i}", H100) for i in range(3)], now=0)
    assert {p.placement.cluster for p in result.placed} == {"accepted"}
    alone = schedule(snapshot([pending]), [job("k", H100)], now=0)
    assert not alone.placed
    assert alone.pending[0].reasons["pending"].reason.startswith("cluster not accepted")


def test_elastic_jobs_placed_in_one_cycle_start_where_they_have_room_to_grow() -> None:
    # Two clusters of 8 devices; packing and the queue's locality alone would put both 2..8
    # jobs on the first one, where only one of them could ever grow.
    snap = snapshot([cluster("a", pool("a", 1)), cluster("b", pool("b", 1))])
    result = schedule(snap, [elastic("e1", 2, 8), elastic("e2", 2, 8)], now=0)
    assert sorted(p.placement.cluster for p in result.placed) == ["a", "b"]
    rooms = sorted(p.scores["growth_room"] for p in result.placed)
    assert rooms == [100.0, 100.0]  # each grows to 8 where it is
    without = replace(
        DEFAULT_CONFIG, score_weights={**DEFAULT_CONFIG.score_weights, "growth_room": 0}
    )
    packed = schedule(snap, [elastic("e1", 2, 8), elastic("e2", 2, 8)], now=0, config=without)
    assert {p.placement.cluster for p in packed.placed} == {"a"}
