"""Member clusters: capacity and use, allocation history, cordon, uncordon, drain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api.context import ctx
from api.registry import ADMIN, Call, Reply
from api.routes import API
from api.schemas import (
    AllocationHistory,
    AllocationSample,
    ClusterList,
    ClusterOut,
    DeviceTelemetryOut,
    FlavorCapacity,
    HistoryQuery,
    TelemetryList,
    TelemetryQuery,
)
from federation.store import clusters as cluster_store
from federation.store import history
from federation.store import telemetry as telemetry_store


def cluster_out(c: cluster_store.ClusterSummary) -> ClusterOut:
    return ClusterOut(
        name=c.name,
        region=c.region,
        zone=c.zone,
        labels=c.labels,
        state=c.state,
        accepted=c.accepted,
        cordoned=c.cordoned,
        draining=c.draining,
        kubernetes_version=c.kubernetes_version,
        agent_version=c.agent_version,
        last_heartbeat=c.last_heartbeat,
        apiserver_problem=c.apiserver_problem,
        nodes=c.nodes,
        ready_nodes=c.ready_nodes,
        cpu_milli=c.cpu_milli,
        cpu_milli_used=c.cpu_milli_used,
        memory_mib=c.memory_mib,
        memory_mib_used=c.memory_mib_used,
        flavors=[
            FlavorCapacity(
                flavor=f.flavor,
                vendor=f.flavor.split("/", 1)[0],
                total=f.total,
                healthy=f.healthy,
                allocated_milli=f.allocated_milli,
                free_whole=f.free_whole,
                reporting=f.reporting,
                utilization=f.utilization,
                temperature_max_c=f.temperature_max_c,
            )
            for f in c.flavors
        ],
    )


@API.op("GET", "/v1/clusters", summary="List clusters", tag="clusters", response=ClusterList)
async def list_clusters(call: Call) -> Reply:
    """Every member cluster with capacity, allocation and free devices by flavor."""
    async with ctx(call.request).db.connection() as conn:
        found = await cluster_store.summaries(conn)
    return Reply(200, ClusterList(items=[cluster_out(c) for c in found]))


@API.op(
    "GET",
    "/v1/allocation-history",
    summary="Allocation over time",
    tag="clusters",
    query=HistoryQuery,
    response=AllocationHistory,
)
async def allocation_history(call: Call) -> Reply:
    """Devices and allocation per cluster and flavor over the last `seconds`, as sampled by
    the leading hub replica (see `history` in the scheduling configuration)."""
    seconds = call.query_as(HistoryQuery).seconds
    config = ctx(call.request).config
    since = datetime.now(UTC) - timedelta(seconds=seconds)
    async with ctx(call.request).db.connection() as conn:
        found = await history.read(conn, since)
    items = [
        AllocationSample(
            taken_at=s.taken_at,
            cluster=s.cluster,
            flavor=s.flavor,
            total=s.total,
            healthy=s.healthy,
            allocated_milli=s.allocated_milli,
        )
        for s in found
    ]
    return Reply(
        200,
        AllocationHistory(
            interval_seconds=config.history_interval_s,
            keep_seconds=config.history_keep_s,
            items=items,
        ),
    )


@API.op(
    "GET",
    "/v1/telemetry",
    summary="Live device telemetry",
    tag="clusters",
    query=TelemetryQuery,
    response=TelemetryList,
)
async def device_telemetry(call: Call) -> Reply:
    """Every device (of one cluster, of one vendor) with its allocation, health and latest
    reading from its vendor's exporter, as the clusters' agents report them."""
    q = call.query_as(TelemetryQuery)
    async with ctx(call.request).db.connection() as conn:
        found = await telemetry_store.device_views(conn, q.cluster, q.vendor)
    return Reply(
        200,
        TelemetryList(
            items=[
                DeviceTelemetryOut(
                    cluster=d.cluster,
                    region=d.region,
                    node=d.node,
                    flavor=d.flavor,
                    vendor=d.flavor.split("/", 1)[0],
                    index=d.index,
                    healthy=d.healthy,
                    allocated_milli=d.allocated_milli,
                    memory_mib=d.memory_mib,
                    utilization=d.utilization,
                    memory_used_mib=d.memory_used_mib,
                    temperature_c=d.temperature_c,
                    fault=d.fault,
                    reported_at=d.reported_at,
                )
                for d in found
            ]
        ),
    )


@API.op(
    "GET",
    "/v1/clusters/{cluster}",
    summary="Get a cluster",
    tag="clusters",
    response=ClusterOut,
    errors=(404,),
)
async def get_cluster(call: Call) -> Reply:
    """One cluster."""
    async with ctx(call.request).db.connection() as conn:
        (found,) = await cluster_store.summaries(conn, call.path("cluster"))
    return Reply(200, cluster_out(found))


async def _flag(call: Call, reason: str, **flags: bool) -> Reply:
    name = call.path("cluster")
    async with ctx(call.request).db.transaction() as conn:
        await cluster_store.set_flags(conn, name, reason=reason, **flags)
        (found,) = await cluster_store.summaries(conn, name)
    return Reply(200, cluster_out(found))


@API.op(
    "POST",
    "/v1/clusters/{cluster}/cordon",
    summary="Cordon a cluster",
    tag="clusters",
    roles=ADMIN,
    response=ClusterOut,
    errors=(404,),
)
async def cordon_cluster(call: Call) -> Reply:
    """Place no new jobs on the cluster; running ones continue."""
    return await _flag(call, "Cordoned", cordoned=True)


@API.op(
    "POST",
    "/v1/clusters/{cluster}/uncordon",
    summary="Uncordon a cluster",
    tag="clusters",
    roles=ADMIN,
    response=ClusterOut,
    errors=(404,),
)
async def uncordon_cluster(call: Call) -> Reply:
    """Accept new jobs again (also ends a drain)."""
    return await _flag(call, "Uncordoned", cordoned=False, draining=False)


@API.op(
    "POST",
    "/v1/clusters/{cluster}/drain",
    summary="Drain a cluster",
    tag="clusters",
    roles=ADMIN,
    response=ClusterOut,
    errors=(404,),
)
async def drain_cluster(call: Call) -> Reply:
    """Cordon the cluster and move its jobs elsewhere (the scheduler requeues them)."""
    return await _flag(call, "Draining", cordoned=True, draining=True)
