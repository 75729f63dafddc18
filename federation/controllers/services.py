"""The service controller: runs each service as shard jobs (leader only, in the scheduling
process, every `interval_s`).

Per Active service: autoscale (`federation.autoscaling`, over the shards' serving reports;
a fixed service wants its `replicas`), share the desired replicas among the shards as caps
(`federation.service_shares`), then open, cap and close shards: a new shard is confined to
the clusters that match the service's placement (regions, clusters, clusterSelector; accepted,
Ready, not cordoned) and hold no live shard of it, and is opened only once every shard is
placed (one at a time, so each lands on its own cluster). A placed shard that held fewer
replicas than its cap, without growing, for `stuck_after_s` is stuck: its cluster has no
room; a shard left waiting as long (its cluster lost, or none of its clusters has room) is
stuck too, with nothing held. Writes `services.desired`, the caps, events with the service's
id (`Scaled`, `ShardOpened`, `ShardClosed`), and wakes the scheduling loop. A Deleted
service's live shards are cancelled.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation import metrics
from federation.autoscaling import Reading, Recommendation, Recommendations, recommend
from federation.compiled import CompiledJob, CompiledService
from federation.hubconfig import ServiceConfig
from federation.service_shares import Share, distribute
from federation.store.events import add_event
from federation.store.listener import JOBS, notify
from federation.store.service_shards import (
    Service,
    Shard,
    close_shard,
    live_shards,
    next_shard_number,
    open_shard,
    services_to_run,
    set_caps,
)
from federation.store.tables import clusters, services

log = logging.getLogger(__name__)


@dataclass
class Reconciled:
    """What one run changed, for logs and tests."""

    scaled: int = 0
    opened: int = 0
    closed: int = 0
    capped: int = 0

    @property
    def changed(self) -> bool:
        """Whether the run wrote anything the scheduling loop should see."""
        return bool(self.opened or self.closed or self.capped)


@dataclass(frozen=True)
class _Cluster:
    name: str
    region: str
    labels: Mapping[str, str]
    usable: bool  # accepted, Ready, not cordoned


def _allowed(compiled: CompiledJob, fleet: Sequence[_Cluster], taken: set[str]) -> tuple[str, ...]:
    """The clusters a new shard of the service may run on."""
    return tuple(
        c.name
        for c in fleet
        if c.usable
        and c.name not in taken
        and (not compiled.regions or c.region in compiled.regions)
        and (not compiled.clusters or c.name in compiled.clusters)
        and all(c.labels.get(k) == v for k, v in compiled.cluster_selector.items())
    )


def _reading(shards: Sequence[Shard]) -> Reading:
    """The scaling metric over every shard's current report."""
    reports = [s.endpoint for s in shards if s.endpoint is not None]
    return Reading(
        ready=sum(e.ready for e in reports),
        sampled=sum(e.sampled for e in reports if e.metric_sum is not None),
        metric_sum=sum(e.metric_sum for e in reports if e.metric_sum is not None),
    )


@dataclass
class ServiceController:
    """Opens, caps and closes the shards of every service (see the module)."""

    config: ServiceConfig = field(default_factory=ServiceConfig)
    _history: dict[uuid.UUID, Recommendations] = field(default_factory=dict)
    # per placed shard below its cap: (held, cap) and since when it has been so
    _short: dict[uuid.UUID, tuple[tuple[int, int], float]] = field(default_factory=dict)

    async def reconcile(self, conn: AsyncConnection, now: float) -> Reconciled:
        """One run over every service (in the caller's transaction, the leader's)."""
        out = Reconciled()
        found = await services_to_run(conn)
        shards = await live_shards(conn, [s.id for s in found])
        fleet = [
            _Cluster(
                r.name, r.region, r.labels, r.accepted and not r.cordoned and r.state == "Ready"
            )
            for r in await conn.execute(sa.select(clusters).order_by(clusters.c.name))
        ]
        live = {s.id for group in shards.values() for s in group}
        self._short = {k: v for k, v in self._short.items() if k in live}
        self._history = {k: v for k, v in self._history.items() if k in {s.id for s in found}}
        metrics.SERVICE_DESIRED.clear()
        metrics.SERVICE_READY.clear()
        for service in found:
            mine = shards.get(service.id, [])
            if service.state != "Active":
                for shard in mine:
                    await self._close(conn, service, shard, "the service was deleted", out)
                continue
            await self._run(conn, service, mine, fleet, now, out)
        if out.changed:
            await notify(conn, JOBS)
        return out

    async def _run(
        self,
        conn: AsyncConnection,
        service: Service,
        shards: list[Shard],
        fleet: Sequence[_Cluster],
        now: float,
        out: Reconciled,
    ) -> None:
        spec = service.compiled.service
        if spec is None:
            log.warning("service %s has no compiled service; skipped", service.id)
            return
        desired, why = self._desired(service, spec, shards, now)
        if desired != service.desired:
            await self._scaled(conn, service, desired, why)
            out.scaled += 1
        metrics.SERVICE_DESIRED.labels(service.tenant, service.name).set(desired)
        ready = sum(s.endpoint.ready for s in shards if s.endpoint is not None)
        metrics.SERVICE_READY.labels(service.tenant, service.name).set(ready)
        taken = {s.cluster for s in shards if s.cluster is not None}
        allowed = _allowed(service.compiled, fleet, taken)
        shares = distribute(
            desired,
            spread=spec.spread,
            shards=[Share(s.id, s.cap or 0, s.schedulable, self._stuck(s, now)) for s in shards],
            room=bool(allowed),
        )
        caps = {}
        for shard in shards:
            cap = shares.caps[shard.id]
            if cap == 0:
                await self._close(conn, service, shard, f"scaled in ({desired} replicas)", out)
            elif cap != shard.cap:
                caps[shard.id] = cap
        await set_caps(conn, caps)
        out.capped += len(caps)
        if shares.new and allowed and all(s.placed for s in shards):
            await self._open(conn, service, allowed, shares.new[0])
            out.opened += 1

    def _desired(
        self, service: Service, spec: CompiledService, shards: Sequence[Shard], now: float
    ) -> tuple[int, str]:
        """The replicas the service wants now, and why (for the `Scaled` event)."""
        bounds = (spec.min_replicas, spec.max_replicas)
        rule = spec.autoscaling
        if rule is None:
            return spec.min_replicas, "replicas"
        current = min(max(service.desired, spec.min_replicas), spec.max_replicas)
        rec: Recommendation = recommend(current, _reading(shards), rule)
        history = self._history.setdefault(service.id, Recommendations(since=now))
        desired = history.stabilized(now, rec.replicas, current, rule, bounds)
        if rec.average is None:
            return desired, f"no reading of {rule.metric}"
        side = "over" if rec.average > rule.target else "under"
        return desired, f"average {rule.metric} {rec.average:.1f} {side} target {rule.target:.1f}"

    def _stuck(self, shard: Shard, now: float) -> bool:
        """Whether a shard has held fewer replicas than its cap, without growing, for
        `stuck_after_s`: placed, its cluster has no room (the hub found none, or its cluster's
        scheduler finds no node for replicas the hub thought fit: those do not count as
        held); waiting (never placed, or requeued after its cluster was lost), none of its
        clusters takes it. Either way its deficit goes to the other shards meanwhile."""
        if shard.cap is None or (shard.placed and shard.schedulable >= shard.cap):
            self._short.pop(shard.id, None)
            return False
        seen = (shard.schedulable if shard.placed else -1, shard.cap)
        since = self._short.get(shard.id)
        if since is None or since[0] != seen:
            self._short[shard.id] = (seen, now)
            return False
        return now - since[1] >= self.config.stuck_after_s

    async def _scaled(
        self, conn: AsyncConnection, service: Service, desired: int, why: str
    ) -> None:
        await conn.execute(
            sa.update(services).where(services.c.id == service.id).values(desired=desired)
        )
        await _event(
            conn,
            service,
            "Scaled",
            f"{service.desired} -> {desired}: {why}",
            {"from": service.desired, "to": desired},
        )

    async def _open(
        self, conn: AsyncConnection, service: Service, allowed: tuple[str, ...], cap: int
    ) -> None:
        n = await next_shard_number(conn, service)
        job = await open_shard(conn, service, n, allowed, cap)
        await _event(
            conn,
            service,
            "ShardOpened",
            f"shard {job.name} for {cap} replicas on any of {', '.join(allowed)}",
            {"job": str(job.id), "shard": job.name, "cap": cap, "clusters": list(allowed)},
        )

    async def _close(
        self, conn: AsyncConnection, service: Service, shard: Shard, why: str, out: Reconciled
    ) -> None:
        await close_shard(conn, shard.id)
        out.closed += 1
        where = f" on {shard.cluster}" if shard.cluster else ""
        await _event(
            conn,
            service,
            "ShardClosed",
            f"shard {shard.name}{where} closed: {why}",
            {"job": str(shard.id), "shard": shard.name, "cluster": shard.cluster},
        )


async def _event(
    conn: AsyncConnection, service: Service, reason: str, message: str, data: dict[str, Any]
) -> None:
    await add_event(
        conn, kind="Service", reason=reason, message=message, service_id=service.id, data=data
    )
