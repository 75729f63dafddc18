"""Assignment filter: the cluster carries each task's flavor in enough quantity to hold the
task even if it were empty; otherwise the "no" is unresolvable (preemption cannot help)."""

from __future__ import annotations

from collections.abc import Hashable

from federation.scheduling.devices import fit
from federation.scheduling.framework import JobContext
from federation.scheduling.model import Assignment, FlavorOption, Task
from federation.scheduling.room import Room
from federation.scheduling.state import ClusterState
from federation.scheduling.status import SUCCESS, Status, unresolvable


class FlavorAvailability:
    """Unresolvable when a task could not fit the cluster even with every node emptied."""

    name = "flavor_availability"

    def filter(self, ctx: JobContext, cluster: ClusterState, assignment: Assignment) -> Status:
        """SUCCESS when every task could fit the emptied cluster."""
        key = ("empty", ctx.key(assignment), ctx.shape)
        status: Status | None = cluster.static_cache.get(key)
        if status is None:
            status = cluster.static_cache[key] = _first_misfit(ctx, cluster, assignment)
        return status


def _first_misfit(ctx: JobContext, cluster: ClusterState, assignment: Assignment) -> Status:
    for task, option in zip(ctx.job.tasks, assignment, strict=True):
        need = task.replicas if ctx.job.gang else 1
        status = _empty_fit(cluster, task, option, ctx.tolerations(option), need)
        if not status.ok:
            return status
    return SUCCESS


def _empty_fit(
    cluster: ClusterState,
    task: Task,
    option: FlavorOption | None,
    tolerations: frozenset[str],
    need: int,
) -> Status:
    if option is not None and option.flavor not in cluster.flavors:
        return unresolvable(f"task {task.name}: no {option.flavor} in this cluster")
    capacity, why = 0, ""
    for representative, count in _node_kinds(cluster).values():
        node = cluster.nodes[representative]
        if not node.tolerates(tolerations):
            why = why or f"untolerated taints {sorted(node.hard_taints - tolerations)}"
            continue
        room = Room(
            node.node.cpu_milli,
            node.node.memory_mib,
            node.node.pods,
            {m: d.emptied(heal=True) for m, d in node.devices.items()},
        )
        if option is not None and option.flavor not in room.devices:
            continue
        per_node = len(room.fill(task, option, need, "pack"))
        if not per_node and not why:
            why = _why_not(room, task, option)
        capacity += per_node * count
        if capacity >= need:
            return SUCCESS
    what = f"{option.count}x {option.flavor}" if option is not None else "CPU-only"
    return unresolvable(
        f"task {task.name}: {capacity} of {need} {what} replicas fit even if the cluster were empty"
        + (f" ({why})" if why else "")
    )


def _why_not(room: Room, task: Task, option: FlavorOption | None) -> str:
    if option is not None:
        reason = fit(room.devices[option.flavor], option.request).reason
        if reason:
            return reason
    return f"node has {room.cpu}m CPU, {room.memory} MiB for {task.cpu_milli}m, {task.memory_mib}"


def _node_kinds(cluster: ClusterState) -> dict[Hashable, tuple[int, int]]:
    """Nodes grouped by what they could hold empty: representative index and count per kind."""
    kinds: dict[Hashable, tuple[int, int]] | None = cluster.static_cache.get("node_kinds")
    if kinds is None:
        kinds = {}
        for n in cluster.nodes:
            node = n.node
            key = (
                node.cpu_milli,
                node.memory_mib,
                node.pods,
                n.hard_taints,
                tuple((d.model, d.memory_mib, d.topology, d.sharing) for d in node.devices),
            )
            first, count = kinds.get(key, (n.index, 0))
            kinds[key] = (first, count + 1)
        cluster.static_cache["node_kinds"] = kinds
    return kinds
