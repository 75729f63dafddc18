"""Scheduling-core throughput: decisions per second of one `schedule()` call on one core.

The fleet is 10 clusters x 1,000 nodes of mixed vendors (NVIDIA H100, Ascend 910 / 910B x8 /
910B x16 / 910C, Kunlunxin P800), about half of the devices busy with running jobs, and
10,000 pending jobs: single-replica jobs of 1-8 devices with one or two acceptable flavors,
gangs of 8-device replicas, device shares and CPU-only jobs, over 20 queues in 4 cohorts.
The generator is seeded, so every run measures the same snapshot.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace

from bench.results import Figure, write_figure
from federation.catalog.types import SharingRule, TopologyRule
from federation.scheduling import (
    AcceleratorRequest,
    Cluster,
    DeviceRequest,
    FlavorOption,
    Job,
    Node,
    NodeDevices,
    Placement,
    Queue,
    Quota,
    ReplicaPlacement,
    SchedulerConfig,
    Snapshot,
    Task,
    allocate,
    fit,
    schedule,
)

GIB = 1024
NO_SHARING = SharingRule()


@dataclass(frozen=True)
class Flavor:
    key: str
    devices: int
    memory_mib: int
    speed: float
    topology: TopologyRule
    sharing: SharingRule = NO_SHARING


FLAVORS = [
    Flavor("nvidia/H100-80GB", 8, 80 * GIB, 3.0, TopologyRule(), SharingRule(enabled=True)),
    Flavor("huawei/Ascend910B3", 8, 64 * GIB, 1.0, TopologyRule()),
    Flavor(
        "huawei/Ascend910",
        8,
        32 * GIB,
        0.8,
        TopologyRule(4, frozenset({1, 2, 4, 8}), "whole_groups"),
    ),
    Flavor(
        "huawei/Ascend910B3x16",
        16,
        64 * GIB,
        1.0,
        TopologyRule(8, frozenset({*range(1, 9), 10, 12, 14, 16}), "even_split"),
    ),
    Flavor(
        "huawei/Ascend910C",
        16,
        64 * GIB,
        2.0,
        TopologyRule(2, frozenset({1, *range(2, 17, 2)}), "whole_groups"),
    ),
    Flavor(
        "kunlunxin/P800",
        8,
        96 * GIB,
        1.1,
        TopologyRule(4, frozenset({1, 2, 4, 8}), "whole_groups"),
    ),
]
QUEUES = [f"team-{i}" for i in range(20)]


def build(
    clusters: int = 10, nodes: int = 1000, pending: int = 10_000, seed: int = 7
) -> tuple[Snapshot, list[Job]]:
    """The benchmark snapshot and pending jobs."""
    rng = random.Random(seed)
    queues = tuple(
        Queue(
            name,
            tenant=name,
            cohort=f"org-{i % 4}",
            quota={f.key: Quota(clusters * nodes * f.devices * 1000 // 40, None) for f in FLAVORS},
        )
        for i, name in enumerate(QUEUES)
    )
    fleet = []
    placements: list[Placement] = []
    for c in range(clusters):
        node_list = []
        for n in range(nodes):
            flavor = FLAVORS[(c + n) % len(FLAVORS)] if n % 10 else None
            node, running = _busy_node(rng, f"c{c}-n{n}", flavor, f"c{c}")
            node_list.append(node)
            placements.extend(running)
        fleet.append(Cluster(f"c{c}", region=f"region-{c % 3}", nodes=tuple(node_list)))
    jobs = [_pending_job(rng, i) for i in range(pending)]
    return Snapshot(tuple(fleet), queues, tuple(placements)), jobs


def _busy_node(
    rng: random.Random, name: str, flavor: Flavor | None, cluster: str
) -> tuple[Node, list[Placement]]:
    if flavor is None:
        return Node(name, cpu_milli=64_000, memory_mib=256 * GIB), []
    n = flavor.devices
    devices = NodeDevices(
        flavor.key,
        (flavor.memory_mib,) * n,
        (0,) * n,
        (0,) * n,
        (True,) * n,
        flavor.topology,
        flavor.sharing,
    )
    running: list[Placement] = []
    cpu = 0
    for _ in range(rng.randint(0, 3)):
        count = rng.choice([1, 2, 4, 8])
        chosen = fit(devices, DeviceRequest(count=count))
        if not chosen.ok:
            continue
        devices = allocate(devices, DeviceRequest(count=count), chosen.devices)
        job = _job(rng, f"{name}-r{len(running)}", [flavor], count, replicas=1, created_at=-1.0)
        cpu += job.tasks[0].cpu_milli
        running.append(
            Placement(job, cluster, (flavor.key,), (ReplicaPlacement(0, name, chosen.devices),))
        )
    node = Node(
        name,
        cpu_milli=192_000,
        memory_mib=2048 * GIB,
        used_cpu_milli=cpu,
        used_pods=len(running),
        devices=(devices,),
    )
    return node, running


def _pending_job(rng: random.Random, i: int) -> Job:
    kind = rng.random()
    if kind < 0.1:
        return Job(f"p{i}", rng.choice(QUEUES), (Task("cpu", 2, 4000, 8 * GIB),), created_at=i)
    if kind < 0.2:
        share = FlavorOption(FLAVORS[0].key, 1, rng.choice([250, 500]), 8 * GIB, FLAVORS[0].speed)
        task = Task("infer", 1, 2000, 16 * GIB, AcceleratorRequest((share,)))
        return Job(f"p{i}", rng.choice(QUEUES), (task,), created_at=i)
    flavors = rng.sample([f for f in FLAVORS if f.devices == 8], k=rng.choice([1, 2]))
    if kind < 0.35:
        return _job(rng, f"p{i}", flavors, 8, replicas=rng.randint(2, 4), created_at=i)
    return _job(rng, f"p{i}", flavors, rng.choice([1, 2, 4, 8]), replicas=1, created_at=i)


def _job(
    rng: random.Random,
    job_id: str,
    flavors: list[Flavor],
    count: int,
    *,
    replicas: int,
    created_at: float,
) -> Job:
    options = tuple(FlavorOption(f.key, count, speed=f.speed) for f in flavors)
    task = Task("worker", replicas, 8000 * count, 64 * GIB * count, AcceleratorRequest(options))
    return Job(
        job_id,
        rng.choice(QUEUES),
        (task,),
        priority=rng.choice([0, 0, 0, 1, 2]),
        created_at=created_at,
        runtime_s=rng.uniform(0, 7200) if created_at < 0 else 0.0,
    )


def with_run_limits(
    snapshot: Snapshot, pending: list[Job], seed: int = 11
) -> tuple[Snapshot, list[Job]]:
    """The same snapshot with `max_runtime_s` on most jobs (80 % of the running ones, ending
    1 min to 2 h from now; 60 % of the pending ones, 5 min to 4 h), so that large gangs get
    reservations and short jobs backfill around them."""
    rng = random.Random(seed)
    placements = tuple(
        replace(p, job=replace(p.job, max_runtime_s=p.job.runtime_s + rng.uniform(60, 7200)))
        if rng.random() < 0.8
        else p
        for p in snapshot.placements
    )
    jobs = [
        replace(j, max_runtime_s=rng.uniform(300, 14_400)) if rng.random() < 0.6 else j
        for j in pending
    ]
    return replace(snapshot, placements=placements), jobs


def measure(
    snapshot: Snapshot, pending: list[Job], config: SchedulerConfig
) -> tuple[float, dict[str, float]]:
    """Jobs decided per second of CPU time by one `schedule()` call (the call is single
    threaded, so this is one core's rate even on a busy machine), with the wall-clock rate
    and the decision counts."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = schedule(snapshot, pending, now=0.0, config=config)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    details = {
        "wall_jobs_per_s": round(len(pending) / wall, 1),
        "placed": len(result.placed),
        "preempted": len(result.preempted),
        "pending": len(result.pending),
        "rejected": len(result.rejected),
        "reserved": len(result.reserved),
    }
    return len(pending) / cpu, details


def run() -> list[Figure]:
    """Decisions per second with the default configuration, with preemption off (the same
    snapshot: its backlog makes hundreds of higher-priority jobs preempt), and with run time
    limits on most jobs (reservations and backfill at work)."""
    snapshot, pending = build()
    limited = with_run_limits(snapshot, pending)
    shape = {"clusters": 10, "nodes_per_cluster": 1000, "pending_jobs": len(pending)}
    figures = []
    for name, config, (snap, jobs) in (
        ("core_jobs_per_s", SchedulerConfig(), (snapshot, pending)),
        ("core_jobs_per_s_no_preemption", SchedulerConfig(preemption=False), (snapshot, pending)),
        ("core_jobs_per_s_with_run_limits", SchedulerConfig(), limited),
    ):
        jobs_per_s, details = measure(snap, jobs, config)
        figures.append(Figure(name, round(jobs_per_s, 1), "jobs/s", True, {**shape, **details}))
    return figures


if __name__ == "__main__":
    for figure in run():
        write_figure(figure)
        print(f"{figure.name}: {figure.value} {figure.unit} {figure.params}")
