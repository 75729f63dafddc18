"""Small builders for scheduling scenarios: fleets, queues, jobs, running placements."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from federation.scheduling.decisions import CycleResult
from federation.scheduling.devices import DeviceRequest, NodeDevices, allocate, fit, release
from federation.scheduling.model import (
    AcceleratorRequest,
    Cluster,
    Constraints,
    Elastic,
    FlavorOption,
    Job,
    Node,
    Placement,
    Queue,
    Quota,
    ReplicaPlacement,
    Snapshot,
    Task,
)

from .rules import GIB, NO_SHARING, RULES

H100 = "nvidia/H100-80GB"
ASCEND = "huawei/Ascend910B3"
ASCEND_910 = "huawei/Ascend910"
P800 = "kunlunxin/P800"

SPEEDS = {H100: 3.0, ASCEND: 1.0, ASCEND_910: 0.8, P800: 1.1, "huawei/Ascend910C": 2.0}


def devices_of(model: str, size: int | None = None) -> NodeDevices:
    """Empty devices of `model` as RULES describes it."""
    rule, n, memory = RULES[model]
    n = size if size is not None else n
    return NodeDevices(model, (memory,) * n, (0,) * n, (0,) * n, (True,) * n, rule, NO_SHARING)


def node(
    name: str,
    model: str | None = H100,
    *,
    size: int | None = None,
    cpu: int = 128_000,
    memory: int = 1024 * GIB,
    ready: bool = True,
    devices: NodeDevices | None = None,
) -> Node:
    """A node with one device model (or none)."""
    if devices is None and model is not None:
        devices = devices_of(model, size)
    return Node(
        name,
        cpu_milli=cpu,
        memory_mib=memory,
        devices=(devices,) if devices is not None else (),
        ready=ready,
    )


def cluster(name: str, nodes: Iterable[Node], *, region: str = "", **kwargs: object) -> Cluster:
    """A cluster of `nodes`."""
    return Cluster(name, region=region, nodes=tuple(nodes), **kwargs)  # type: ignore[arg-type]


def pool(name: str, count: int, model: str | None = H100, **kwargs: object) -> list[Node]:
    """`count` identical nodes named name-0, name-1, ..."""
    return [node(f"{name}-{i}", model, **kwargs) for i in range(count)]  # type: ignore[arg-type]


def queue(
    name: str,
    quota: Mapping[str, int | tuple[int, int | None]] | None = None,
    *,
    cohort: str = "",
    tenant: str = "",
    weight: float = 1.0,
) -> Queue:
    """A queue; quota values are nominal or (nominal, borrowing_limit)."""
    quotas = {r: Quota(*v) if isinstance(v, tuple) else Quota(v) for r, v in (quota or {}).items()}
    return Queue(name, tenant=tenant or name, cohort=cohort, weight=weight, quota=quotas)


def job(
    id: str,
    *flavors: str,
    queue: str = "q",
    count: int = 1,
    milli: int = 1000,
    replicas: int = 1,
    priority: int = 0,
    created_at: float = 0.0,
    preemptible: bool = True,
    gang: bool = True,
    cpu: int = 1000,
    memory: int = GIB,
    runtime_s: float = 0.0,
    max_runtime_s: float | None = None,
    checkpoint_interval_s: float | None = None,
    since_checkpoint_s: float | None = None,
    constraints: Constraints | None = None,
    elastic: tuple[int, int] | None = None,
) -> Job:
    """A one-task job asking `count` devices of any of `flavors` (none: CPU only); `elastic`:
    its (min, max) replicas, starting with `replicas`."""
    options = tuple(
        FlavorOption(f, count=count, milli=milli, speed=SPEEDS.get(f, 1.0)) for f in flavors
    )
    task = Task(
        "main",
        replicas=replicas,
        cpu_milli=cpu,
        memory_mib=memory,
        accelerators=AcceleratorRequest(options) if options else None,
        elastic=Elastic(*elastic) if elastic is not None else None,
    )
    return Job(
        id,
        queue,
        (task,),
        priority=priority,
        preemptible=preemptible,
        created_at=created_at,
        gang=gang,
        constraints=constraints or Constraints(),
        runtime_s=runtime_s,
        max_runtime_s=max_runtime_s,
        checkpoint_interval_s=checkpoint_interval_s,
        since_checkpoint_s=since_checkpoint_s,
    )


def snapshot(
    clusters: Iterable[Cluster],
    queues: Iterable[Queue] = (),
    running: Iterable[tuple[Job, str]] = (),
) -> Snapshot:
    """A snapshot; each running (job, cluster) is packed onto the cluster's nodes in order and
    reported as node usage, as a cluster's inventory would."""
    fleet = {c.name: c for c in clusters}
    placements = []
    for j, where in running:
        fleet[where], placement = _run(fleet[where], j)
        placements.append(placement)
    queues = tuple(queues) or (queue("q"),)
    return Snapshot(tuple(fleet.values()), queues, tuple(placements))


def _run(c: Cluster, j: Job) -> tuple[Cluster, Placement]:
    nodes = list(c.nodes)
    replicas = []
    flavors = []
    for t, task in enumerate(j.tasks):
        option = task.accelerators.options[0] if task.accelerators else None
        flavors.append(option.flavor if option else "")
        for _ in range(task.replicas):
            for i, n in enumerate(nodes):
                placed = _take(n, task, option.request if option else None)
                if placed is not None:
                    nodes[i], devices = placed
                    replicas.append(ReplicaPlacement(t, n.name, devices))
                    break
            else:
                raise ValueError(f"{j.id} does not fit {c.name}")
    placement = Placement(j, c.name, tuple(flavors), tuple(replicas))
    return replace(c, nodes=tuple(nodes)), placement


def _take(
    n: Node, task: Task, request: DeviceRequest | None
) -> tuple[Node, tuple[int, ...]] | None:
    if n.cpu_milli - n.used_cpu_milli < task.cpu_milli:
        return None
    devices: tuple[int, ...] = ()
    new_devices = n.devices
    if request is not None:
        if not n.devices:
            return None
        chosen = fit(n.devices[0], request)
        if not chosen.ok:
            return None
        devices = chosen.devices
        new_devices = (allocate(n.devices[0], request, devices),)
    return (
        replace(
            n,
            used_cpu_milli=n.used_cpu_milli + task.cpu_milli,
            used_memory_mib=n.used_memory_mib + task.memory_mib,
            used_pods=n.used_pods + 1,
            devices=new_devices,
        ),
        devices,
    )


def advance(before: Snapshot, result: CycleResult) -> Snapshot:
    """The next cycle's snapshot as a shell would build it: victims gone, elastic jobs resized,
    placed jobs running (their estimate taken as the real placement), preemptors' reservations
    held."""
    fleet = {c.name: c for c in before.clusters}
    placements = {p.job.id: p for p in before.placements}
    for r in result.resized:  # in the order decided: a job scaled in may be evicted after
        old, new = r.before, r.placement
        fleet[old.cluster] = _account(
            fleet[old.cluster], replace(old, replicas=old.beyond(new)), -1
        )
        fleet[new.cluster] = _account(fleet[new.cluster], replace(new, replicas=new.beyond(old)), 1)
        placements[new.job.id] = new
    resized = replace(before, clusters=tuple(fleet.values()), placements=tuple(placements.values()))
    after = without(resized, [v for p in result.preempted for v in p.victims])
    fleet = {c.name: c for c in after.clusters}
    placements = {p.job.id: p for p in after.placements}
    for placed in result.placed:
        p = placed.placement
        fleet[p.cluster] = _account(fleet[p.cluster], p, 1)
        placements[p.job.id] = p
    reservations = [r for r in after.reservations if r.job.id not in placements]
    reservations += [p.reservation for p in result.preempted]
    return replace(
        after,
        clusters=tuple(fleet.values()),
        placements=tuple(placements.values()),
        reservations=tuple(reservations),
    )


def without(before: Snapshot, victims: Iterable[Placement]) -> Snapshot:
    """The snapshot once `victims` have left their clusters."""
    fleet = {c.name: c for c in before.clusters}
    gone = set()
    for victim in victims:
        fleet[victim.cluster] = _account(fleet[victim.cluster], victim, -1)
        gone.add(victim.job.id)
    placements = tuple(p for p in before.placements if p.job.id not in gone)
    return replace(before, clusters=tuple(fleet.values()), placements=placements)


def _account(c: Cluster, placement: Placement, sign: int) -> Cluster:
    nodes = {n.name: n for n in c.nodes}
    for replica in placement.replicas:
        n = nodes[replica.node]
        task = placement.job.tasks[replica.task]
        option = placement.option(replica.task)
        devices = n.devices
        if option is not None:
            change = allocate if sign > 0 else release
            devices = tuple(
                change(d, option.request, replica.devices) if d.model == option.flavor else d
                for d in n.devices
            )
        nodes[n.name] = replace(
            n,
            used_cpu_milli=n.used_cpu_milli + sign * task.cpu_milli,
            used_memory_mib=n.used_memory_mib + sign * task.memory_mib,
            used_pods=n.used_pods + sign,
            devices=devices,
        )
    return replace(c, nodes=tuple(nodes.values()))
