"""A service shard as its cluster serves it: the Service in front of its pods and the serving
status the agent reports (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cluster_agents.agent.backend import PodStatus, ShardService
from federation.compiled import CompiledService
from federation.k8s_names import tenant_namespace
from federation.wire.agent import Assignment, EndpointPort, ServingStatus
from federation.wire.telemetry import DeviceTelemetry

METRIC_SUM_MAX = 1e15  # `ServingStatus.metric_sum`'s bound


@dataclass(frozen=True)
class Reading:
    """The scaling metric summed over the ready pods of a shard that served it."""

    metric_sum: float = 0.0
    sampled: int = 0


def device_reading(
    pods: Iterable[PodStatus], flavor: str, latest: Mapping[tuple[str, str, int], DeviceTelemetry]
) -> Reading:
    """A shard's scaling metric when it scales by its devices' utilization: per ready pod, the
    mean utilization (percent) of the devices of `flavor` bound to it, as the exporters last
    read them; a pod none of whose devices has a reading is not sampled."""
    total, sampled = 0.0, 0
    for pod in pods:
        if not pod.ready:
            continue
        found = [latest.get((pod.node, flavor, i)) for i in pod.devices]
        values = [r.utilization for r in found if r is not None and r.utilization is not None]
        if values:
            total += sum(values) / len(values)
            sampled += 1
    return Reading(total, sampled)


def shard_service(assignment: Assignment, service: CompiledService, prefix: str) -> ShardService:
    """The Service of a shard's placement: the service's name and ports, in its tenant's
    namespace (a batch job's per-placement Services are named `sp-<job id>-e<epoch>`, and a
    shard has none, so the only other Service of that name can be a previous placement's)."""
    return ShardService(
        name=service.service,
        namespace=tenant_namespace(prefix, assignment.tenant),
        tenant=assignment.tenant,
        job=str(assignment.job),
        epoch=assignment.epoch,
        ports=service.ports,
    )


def serving_status(
    shard: ShardService,
    service: CompiledService,
    cluster_ip: str,
    pods: Iterable[PodStatus],
    reading: Reading | None,
) -> ServingStatus:
    """What the hub learns of a shard: where it is served, its replicas with a ready pod
    (`pods`: those of the replicas it holds), those ready on the current generation, and for an
    autoscaled service the metric read from them (none read yet: 0 of 0)."""
    ready = {(p.task, p.replica) for p in pods if p.ready}
    updated = {(p.task, p.replica) for p in pods if p.ready and p.generation == service.generation}
    read = reading or Reading()
    scaled = service.autoscaling is not None
    return ServingStatus(
        address=f"{shard.name}.{shard.namespace}.svc.cluster.local",
        cluster_ip=cluster_ip,
        ports=[EndpointPort(name=p.name, port=p.port, protocol=p.protocol) for p in shard.ports],
        ready=len(ready),
        updated=len(updated),
        generation=service.generation,
        metric_sum=min(max(read.metric_sum, 0.0), METRIC_SUM_MAX) if scaled else None,
        sampled=read.sampled if scaled else 0,
    )
