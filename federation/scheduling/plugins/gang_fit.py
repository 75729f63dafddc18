"""Assignment filter: every replica the job needs fits on some node at once (first fit
decreasing over nodes), with device fit against free devices minus reservations.

Clusters are first checked against per-flavor summaries (free devices, most free on one node)
so that most clusters that cannot hold a job are rejected without visiting nodes; results are
cached per cluster version and request shape.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

from federation.scheduling.devices import (
    WHOLE,
    Preference,
    max_feasible_count,
    shape,
)
from federation.scheduling.framework import Estimate, JobContext
from federation.scheduling.model import Assignment, FlavorOption, Job, ReplicaPlacement, Task
from federation.scheduling.room import Room
from federation.scheduling.state import ClusterState, NodeState
from federation.scheduling.status import SUCCESS, Status, unschedulable


class GangFit:
    """Unschedulable unless all replicas of a gang (one per task otherwise) fit right now."""

    name = "gang_fit"

    def filter(self, ctx: JobContext, cluster: ClusterState, assignment: Assignment) -> Status:
        """SUCCESS with an estimate recorded in `ctx.estimates`, or the shortfall in numbers.

        Results are cached per request shape and the versions of the flavors involved, so a
        placement of one flavor leaves what is known about the others valid.
        """
        flavors = ("" if o is None else o.flavor for o in assignment)
        key = (
            ctx.key(assignment),
            ctx.shape,
            ctx.config.device_preference,
            cluster.versions_of(flavors),
        )
        found: tuple[Status, Estimate | None] | None = cluster.fit_cache.get(key)
        if found is None:
            found = cluster.fit_cache[key] = _estimate(ctx, cluster, assignment)
        status, estimate = found
        if estimate is not None:
            ctx.estimates[(cluster.name, assignment)] = estimate
        return status


def _estimate(
    ctx: JobContext, cluster: ClusterState, assignment: Assignment
) -> tuple[Status, Estimate | None]:
    job, prefer = ctx.job, ctx.config.device_preference
    status = _summary_check(cluster, job, assignment)
    if not status.ok:
        return status, None
    rooms: dict[int, Room] = {}
    replicas: list[ReplicaPlacement] = []
    for t in sorted(range(len(job.tasks)), key=lambda t: _size(job.tasks[t], assignment[t])):
        task, option = job.tasks[t], assignment[t]
        tolerations = ctx.tolerations(option)
        placed = 0
        for i in _candidates(cluster, task, option, prefer):
            node = cluster.nodes[i]
            if not node.tolerates(tolerations):
                continue
            room = rooms.get(i)
            if room is None:
                if not _may_hold(node, task):
                    continue
                room = rooms[i] = Room.of(node)
            for devices in room.fill(task, option, task.replicas - placed, prefer):
                replicas.append(ReplicaPlacement(t, node.node.name, devices))
                placed += 1
            if placed == task.replicas:
                break
        need = task.replicas if job.gang else 1
        if placed < need:
            return _shortfall(cluster, task, option, placed, need, rooms), None
    used = {cluster.node_index[r.node] for r in replicas}
    intact = sum(1 for i in used if _untouched(cluster.nodes[i]))
    replicas.sort(key=lambda r: r.task)
    return SUCCESS, Estimate(tuple(replicas), len(used), intact)


def _size(task: Task, option: FlavorOption | None) -> tuple[int, int, int]:
    """Sort key placing the largest replicas first (first fit decreasing)."""
    milli = option.milli_devices if option is not None else 0
    return (-milli, -task.memory_mib, -task.cpu_milli)


def _may_hold(node: NodeState, task: Task) -> bool:
    return (
        node.cpu_free >= task.cpu_milli
        and node.memory_free >= task.memory_mib
        and node.pods_free >= 1
    )


def _untouched(node: NodeState) -> bool:
    return bool(node.devices) and all(d.free_count() == d.size for d in node.devices.values())


def _candidates(
    cluster: ClusterState, task: Task, option: FlavorOption | None, prefer: Preference
) -> Iterable[int]:
    """Nodes that may hold a replica: fullest first when packing, emptiest when spreading;
    a replica without accelerators only nodes without them unless its task allows."""
    if option is None:
        return cluster.ready_nodes if task.accelerator_nodes else cluster.cpu_nodes
    index = cluster.flavors.get(option.flavor)
    if index is None:
        return ()
    fullest_first = prefer == "pack"
    if option.milli < WHOLE:
        return chain(index.partial, index.nodes_with(1, fullest_first=fullest_first))
    return index.nodes_with(option.count, fullest_first=fullest_first)


def _summary_check(cluster: ClusterState, job: Job, assignment: Assignment) -> Status:
    """Reject from per-flavor counts alone when the free devices cannot be enough."""
    need: dict[str, int] = {}
    for task, option in zip(job.tasks, assignment, strict=True):
        if option is None:
            continue
        index = cluster.flavors.get(option.flavor)
        if index is None or not index.nodes:
            return unschedulable(f"task {task.name}: no ready node with {option.flavor}")
        if option.milli < WHOLE:
            if not index.free and not index.partial:
                return unschedulable(f"task {task.name}: no {option.flavor} device has room")
            continue
        largest = index.largest_free()
        if option.count > largest:
            return unschedulable(
                f"task {task.name}: needs {option.count}x {option.flavor} on one node, "
                f"at most {largest} free on a node"
            )
        replicas = task.replicas if job.gang else 1
        need[option.flavor] = need.get(option.flavor, 0) + replicas * option.count
    for flavor, count in need.items():
        free = cluster.flavors[flavor].free
        if count > free:
            return unschedulable(f"needs {count}x {flavor} at once, {free} free")
    return SUCCESS


def _shortfall(
    cluster: ClusterState,
    task: Task,
    option: FlavorOption | None,
    placed: int,
    need: int,
    rooms: dict[int, Room],
) -> Status:
    """Why the replicas of `task` do not fit, with numbers."""
    each = f"{task.cpu_milli}m CPU, {task.memory_mib} MiB"
    if option is None:
        where = "" if task.accelerator_nodes else " on nodes without accelerators"
        return unschedulable(
            f"task {task.name}: {placed} of {need} replicas fit{where} ({each} each)"
        )
    index = cluster.flavors[option.flavor]
    request = option.request
    if placed or request.is_share:
        return unschedulable(
            f"task {task.name}: {placed} of {need} replicas of "
            f"{_amount(option)} fit, {index.free} devices free"
        )
    best, example = 0, None
    for k in range(len(index.buckets) - 1, 0, -1):
        if k <= best:
            break
        for i in index.buckets[k]:
            room = rooms.get(i)
            devices = room.devices if room is not None else cluster.nodes[i].devices
            example = devices[option.flavor]
            best = max(best, max_feasible_count(example, request))
    if best >= option.count:
        return unschedulable(
            f"task {task.name}: nodes with {_amount(option)} free lack CPU, memory or pods "
            f"({each} per replica)"
        )
    where = shape(example, option.count) if example is not None else ""
    return unschedulable(
        f"task {task.name}: needs {_amount(option)} per replica {where}, largest feasible {best}"
    )


def _amount(option: FlavorOption) -> str:
    if option.milli < WHOLE:
        return f"a {option.milli}m share of {option.flavor}"
    return f"{option.count}x {option.flavor}"
