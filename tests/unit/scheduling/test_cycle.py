"""The cycle as a specification: where jobs go, why others wait, and multi-round scenarios."""

from __future__ import annotations

from dataclasses import replace

from federation.scheduling.cycle import FLEET, schedule
from federation.scheduling.decisions import CycleResult
from federation.scheduling.framework import SchedulerConfig
from federation.scheduling.model import (
    AcceleratorRequest,
    Constraints,
    FlavorOption,
    Job,
    Snapshot,
    Task,
)
from federation.scheduling.status import Code

from .builders import (
    ASCEND,
    ASCEND_910,
    H100,
    advance,
    cluster,
    job,
    node,
    pool,
    queue,
    snapshot,
)


def placed_on(result: CycleResult) -> dict[str, str]:
    return {p.placement.job.id: p.placement.cluster for p in result.placed}


def test_job_goes_to_the_only_cluster_with_its_flavor() -> None:
    snap = snapshot([cluster("nv", pool("nv", 2)), cluster("hw", pool("hw", 2, ASCEND))])
    result = schedule(snap, [job("j", ASCEND, count=8)], now=0)
    assert placed_on(result) == {"j": "hw"}
    replicas = result.placed[0].placement.replicas
    assert [(r.node, r.devices) for r in replicas] == [("hw-0", tuple(range(8)))]
    assert result.placed[0].placement.flavors == (ASCEND,)


def test_first_acceptable_flavor_in_the_users_order_wins_within_a_cluster() -> None:
    mixed = [node("h", H100), node("a", ASCEND)]
    snap = snapshot([cluster("mixed", mixed)])
    result = schedule(snap, [job("j", ASCEND, H100, count=2)], now=0)
    assert result.placed[0].placement.flavors == (ASCEND,)
    fastest = schedule(
        snap,
        [job("j", ASCEND, H100, count=2)],
        now=0,
        config=SchedulerConfig(flavor_order="fastest"),
    )
    assert fastest.placed[0].placement.flavors == (H100,)


def test_heterogeneous_job_picks_a_flavor_per_task_in_one_cluster() -> None:
    tasks = (
        Task("trainer", 2, 1000, 1024, AcceleratorRequest((FlavorOption(H100, count=8),))),
        Task(
            "rollout",
            4,
            1000,
            1024,
            AcceleratorRequest((FlavorOption(H100, count=4), FlavorOption(ASCEND, count=4))),
        ),
        Task("controller", 1, 2000, 4096),
    )
    hetero = Job("rl", "q", tasks)
    snap = snapshot([cluster("mixed", [*pool("nv", 2), *pool("hw", 2, ASCEND), node("c", None)])])
    result = schedule(snap, [hetero], now=0)
    placement = result.placed[0].placement
    assert placement.flavors == (H100, ASCEND, "")
    per_task = [sum(1 for r in placement.replicas if r.task == t) for t in range(3)]
    assert per_task == [2, 4, 1]
    assert [r.node for r in placement.replicas if r.task == 2] == ["c"]


def test_a_cpu_only_task_stays_off_accelerator_nodes_unless_it_allows_them() -> None:
    cpu_only = Job("prep", "q", (Task("prep", 1, 1000, 1024),))
    allowed = Job("prep2", "q", (Task("prep", 1, 1000, 1024, accelerator_nodes=True),))
    snap = snapshot([cluster("gpus", pool("nv", 2))])
    result = schedule(snap, [cpu_only, allowed], now=0)
    assert [p.placement.job.id for p in result.placed] == ["prep2"]
    assert "without accelerators" in str(result.pending[0].reasons["gpus"])


def test_pending_reason_names_the_topology_shortfall_per_cluster() -> None:
    # Ascend 910 nodes: 4-card rings; one card taken in each ring leaves no intact ring.
    busy = [job(f"r{i}", ASCEND_910, count=1) for i in range(2)]
    fleet = [cluster("beijing-a", [node("n", ASCEND_910)]), cluster("nv", pool("nv", 1))]
    snap = snapshot(fleet, running=[(busy[0], "beijing-a")])
    snap = _take_device(snap, "beijing-a", 4)
    result = schedule(snap, [job("big", ASCEND_910, count=4, priority=0)], now=0)
    pending = result.pending[0]
    status = pending.reasons["beijing-a"]
    assert status.code is Code.UNSCHEDULABLE
    assert "4x huawei/Ascend910" in status.reason and "largest feasible 2" in status.reason
    assert pending.reasons["nv"].code is Code.UNRESOLVABLE
    assert pending.message.startswith("0/2 clusters available: beijing-a: task main: needs")
    assert result.pending_reason("big", "beijing-a") == status


def _take_device(snap: Snapshot, name: str, device: int) -> Snapshot:
    """Mark one device used outside the hub's knowledge (another scheduler's pod)."""
    fleet = []
    for c in snap.clusters:
        if c.name == name:
            n = c.nodes[0]
            d = n.devices[0]
            used = tuple(1000 if i == device else u for i, u in enumerate(d.used_milli))
            mem = tuple(
                d.memory_mib[i] if i == device else m for i, m in enumerate(d.used_memory_mib)
            )
            c = replace(
                c, nodes=(replace(n, devices=(replace(d, used_milli=used, used_memory_mib=mem),)),)
            )
        fleet.append(c)
    return replace(snap, clusters=tuple(fleet))


def test_job_that_never_fits_anywhere_is_rejected_fast() -> None:
    snap = snapshot([cluster("a", pool("a", 2)), cluster("b", pool("b", 1, ASCEND))])
    result = schedule(snap, [job("huge", H100, count=16)], now=0)
    assert [r.job.id for r in result.rejected] == ["huge"]
    assert "needs 16 devices, node has 8" in result.rejected[0].reasons["a"].reason


def test_unknown_queue_is_rejected_for_the_fleet() -> None:
    snap = snapshot([cluster("a", pool("a", 1))])
    result = schedule(snap, [job("j", H100, queue="nope")], now=0)
    assert result.rejected[0].reasons[FLEET].reason == "unknown queue 'nope'"


def test_not_ready_or_cordoned_clusters_keep_jobs_pending_not_rejected() -> None:
    snap = snapshot(
        [
            cluster("down", pool("d", 1), ready=False),
            cluster("cordoned", pool("c", 1), cordoned=True),
        ]
    )
    result = schedule(snap, [job("j", H100)], now=0)
    assert result.pending[0].reasons["down"].reason == "cluster not ready"
    assert result.pending[0].reasons["cordoned"].reason == "cluster cordoned"


def test_constraints_restrict_regions_clusters_and_labels() -> None:
    fleet = [
        cluster("sh", pool("sh", 1), region="shanghai", labels={"tier": "gold"}),
        cluster("bj", pool("bj", 1), region="beijing"),
    ]
    snap = snapshot(fleet)
    only_bj = job("a", H100, constraints=Constraints(regions=frozenset({"beijing"})))
    gold = job("b", H100, constraints=Constraints(cluster_selector={"tier": "gold"}))
    result = schedule(snap, [only_bj, gold], now=0)
    assert placed_on(result) == {"a": "bj", "b": "sh"}


def test_quota_keeps_a_queue_within_nominal_and_explains() -> None:
    snap = snapshot([cluster("a", pool("a", 2))], [queue("q", {H100: 8000})])
    result = schedule(snap, [job("j1", H100, count=8), job("j2", H100, count=1)], now=0)
    assert placed_on(result) == {"j1": "a"}
    assert "uses 8000 of nominal 8000" in result.pending[0].reasons["a"].reason


def test_cohort_lends_unused_quota_up_to_the_borrowing_limit() -> None:
    queues = [
        queue("lender", {H100: 8000}, cohort="c"),
        queue("borrower", {H100: (8000, 4000)}, cohort="c"),
    ]
    snap = snapshot([cluster("a", pool("a", 4))], queues)
    jobs = [job(f"b{i}", H100, count=4, queue="borrower", created_at=i) for i in range(4)]
    result = schedule(snap, jobs, now=0)
    assert sorted(placed_on(result)) == ["b0", "b1", "b2"]  # 8 nominal + 4 borrowed
    assert "borrowing limit reached at 12000" in result.pending[0].reasons["a"].reason


def test_packing_prefers_the_fuller_cluster_and_locality_the_queues_cluster() -> None:
    fleet = [cluster("empty", pool("e", 2)), cluster("busy", pool("b", 2))]
    snap = snapshot(
        fleet,
        [queue("q"), queue("other")],
        running=[(job("r", H100, count=8, queue="other"), "busy")],
    )
    result = schedule(snap, [job("j", H100, count=8)], now=0)
    assert placed_on(result) == {"j": "busy"}
    assert result.placed[0].scores["packing"] > 0
    nearby = snapshot(fleet, [queue("q")], running=[(job("r", H100, count=1), "empty")])
    weights = {"locality": 1.0}
    only_locality = SchedulerConfig(score_weights=weights)
    assert placed_on(schedule(nearby, [job("j", H100)], now=0, config=only_locality)) == {
        "j": "empty"
    }


def test_cost_score_prefers_the_cheaper_cluster() -> None:
    fleet = [
        cluster("dear", pool("d", 1), labels={"suanpan.io/price": "4.0"}),
        cluster("cheap", pool("c", 1), labels={"suanpan.io/price": "1.5"}),
    ]
    config = SchedulerConfig(score_weights={"cost": 1.0})
    result = schedule(snapshot(fleet), [job("j", H100, count=2)], now=0, config=config)
    assert placed_on(result) == {"j": "cheap"}
    assert result.placed[0].scores["cost"] == 100.0


def test_jobs_placed_earlier_in_the_cycle_take_capacity_from_later_ones() -> None:
    snap = snapshot([cluster("a", pool("a", 1))])
    jobs = [job(f"j{i}", H100, count=4, created_at=i) for i in range(3)]
    result = schedule(snap, jobs, now=0)
    assert sorted(placed_on(result)) == ["j0", "j1"]
    devices = sorted(d for p in result.placed for r in p.placement.replicas for d in r.devices)
    assert devices == list(range(8))


def test_non_gang_job_starts_with_the_replicas_that_fit() -> None:
    snap = snapshot([cluster("a", pool("a", 1))])
    result = schedule(snap, [job("j", H100, count=4, replicas=3, gang=False)], now=0)
    assert len(result.placed[0].placement.replicas) == 2
    gang = schedule(snap, [job("g", H100, count=4, replicas=3)], now=0)
    assert [r.job.id for r in gang.rejected] == ["g"]  # a gang of 3x4 never fits 8 devices


def test_shares_pack_onto_one_device() -> None:
    from .rules import HAMI_SHARING

    devices = replace(node("s").devices[0], sharing=HAMI_SHARING)
    snap = snapshot([cluster("a", [node("s", devices=devices)])])
    jobs = [job(f"s{i}", H100, milli=250, created_at=i) for i in range(4)]
    result = schedule(snap, jobs, now=0)
    assert {r.devices for p in result.placed for r in p.placement.replicas} == {(0,)}


def test_same_snapshot_same_decisions() -> None:
    fleet = [cluster(n, pool(n, 3)) for n in ("a", "b", "c")]
    snap = snapshot(fleet, running=[(job("r", H100, count=3), "b")])
    jobs = [job(f"j{i}", H100, count=1 + i % 8, created_at=i % 3) for i in range(12)]
    assert schedule(snap, jobs, now=5) == schedule(snap, list(reversed(jobs)), now=5)


def test_multi_round_preemptor_gets_the_capacity_its_victims_free() -> None:
    snap = snapshot(
        [cluster("a", pool("a", 1))],
        running=[(job("low", H100, count=8, priority=1, runtime_s=60), "a")],
    )
    urgent = job("urgent", H100, count=8, priority=10)
    filler = job("filler", H100, count=2, priority=5, created_at=1)
    first = schedule(snap, [urgent], now=0)
    assert [v.job.id for v in first.preempted[0].victims] == ["low"]
    assert not first.placed
    # Victims are gone next round; the reservation keeps a mid-priority filler off the node.
    second_snap = advance(snap, first)
    assert second_snap.reservations[0].job.id == "urgent"
    second = schedule(second_snap, [filler], now=1)
    assert not second.placed
    third = schedule(second_snap, [filler, urgent], now=1)
    assert placed_on(third) == {"urgent": "a"}


def test_a_gang_that_failed_to_start_somewhere_is_replanned_elsewhere_when_possible() -> None:
    # "a" is fuller, so packing alone would choose it again
    snap = snapshot([cluster("a", pool("a", 1)), cluster("b", pool("b", 2))])
    retry = job("j", H100, count=8, constraints=Constraints(avoided_clusters=frozenset({"a"})))
    assert placed_on(schedule(snap, [job("j", H100, count=8)], now=0)) == {"j": "a"}
    assert placed_on(schedule(snap, [retry], now=0)) == {"j": "b"}
    only_a = snapshot([cluster("a", pool("a", 1))])
    assert placed_on(schedule(only_a, [retry], now=0)) == {"j": "a"}  # soft: never stuck
