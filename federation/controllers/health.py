"""Cluster health: the lease each agent renews, and the failover of a lost cluster's jobs.

A cluster whose lease is older than `not_ready_after_s`, or whose agent says it cannot reach
its kube-apiserver, is NotReady (no new work). One whose lease is older than `offline_after_s`
(the lease), or whose apiserver has been unreachable that long, is Offline (lost) — unless
more than `mass_silence_fraction` of the fleet fell silent at once, which points at the hub
itself (overloaded or cut off), as kube-controller-manager stops evicting when a whole zone
goes NotReady; its jobs go
back to the queue by their failover policy: *fast* ones at once (their next placement gets a
new epoch, which fences off any pod the old cluster still runs), *exclusive* ones only once the
agent has been silent for the lease plus `exclusive_margin_s` (by then it has stopped their
pods itself); jobs whose `failurePolicy.onClusterFailure` is `fail` fail at once instead
(they run nowhere else, so there is nothing to wait for). A draining cluster's fast jobs are
requeued at once, its exclusive ones are evicted (Preempting) and requeued when the agent
reports their pods gone. Silence is counted from `since` at the earliest: a hub that
(re)starts leading gives every agent a full lease.
See docs/failover.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.hubconfig import HealthConfig
from federation.store.events import add_event
from federation.store.lifecycle import (
    HOLDING_STATES,
    JobChange,
    Step,
    change_jobs,
    clusters_silent,
    clusters_unreachable,
    release_placements,
    silent_share,
)
from federation.store.tables import clusters, jobs


async def check(
    conn: AsyncConnection, config: HealthConfig, since: datetime | None = None
) -> list[str]:
    """Apply lease timeouts, apiserver reachability and drains; return what changed, for logs."""
    changed: list[str] = []
    cut_off = await clusters_unreachable(conn, "Ready", "NotReady", 0.0)
    stale = await clusters_silent(conn, "Ready", "NotReady", config.not_ready_after_s, since)
    notes = [(c, "agent cannot reach its kube-apiserver") for c in cut_off]
    notes += [(c, "agent lease not renewed") for c in stale]
    for (cluster_id, name), message in notes:
        await add_event(
            conn, kind="Cluster", reason="NotReady", cluster_id=cluster_id, message=message
        )
        changed.append(f"{name} NotReady ({message})")
    silent, fleet = await silent_share(conn, config.not_ready_after_s, since)
    if fleet >= 2 and silent > config.mass_silence_fraction * fleet:
        # most of the fleet silent together (counted from NotReady, so that clusters that
        # fell silent together are not lost one by one): far likelier the hub (overloaded, or
        # cut off itself) than the clusters; they stay NotReady (no new work), keep their jobs
        changed.append(f"{silent} of {fleet} clusters silent at once: none declared lost")
        lost = []
    else:
        lost = await clusters_silent(conn, "NotReady", "Offline", config.offline_after_s, since)
    lost += await clusters_unreachable(conn, "NotReady", "Offline", config.offline_after_s)
    for cluster_id, name in lost:
        await add_event(
            conn,
            kind="Cluster",
            reason="Offline",
            cluster_id=cluster_id,
            message="fast jobs requeued; exclusive ones once the agent has been silent "
            f"{config.offline_after_s + config.exclusive_margin_s:.0f} s",
        )
        changed.append(f"{name} Offline")
    policy = sa.func.coalesce(jobs.c.compiled["failover"].astext, config.default_failover)
    fails = jobs.c.compiled["failurePolicy"]["onClusterFailure"].astext == "fail"
    heard: Any = clusters.c.last_heartbeat
    if since is not None:
        heard = sa.func.greatest(heard, since)
    quiet = heard < sa.func.now() - sa.func.make_interval(
        0, 0, 0, 0, 0, 0, config.offline_after_s + config.exclusive_margin_s
    )
    offline = clusters.c.state == "Offline"
    # failing a job runs it nowhere else, so an exclusive one need not wait for the margin
    gone = sa.and_(offline, sa.or_(policy == "fast", quiet, fails))
    held = await conn.execute(
        sa.select(
            jobs.c.id,
            jobs.c.state,
            jobs.c.version,
            policy.label("policy"),
            gone.label("lost"),
            sa.func.coalesce(fails, False).label("fails"),
        )
        .join(clusters, clusters.c.id == jobs.c.cluster_id)
        .where(jobs.c.state.in_(HOLDING_STATES), sa.or_(clusters.c.draining, gone))
        .with_for_update(of=jobs)
    )
    moves: list[JobChange] = []
    for job_id, state, version, job_policy, lost_job, job_fails in list(held):
        if lost_job and job_fails and state != "Preempting":
            target, reason = "Failed", "ClusterLost"  # failurePolicy.onClusterFailure: fail
        elif lost_job:
            target, reason = "Queued", "ClusterLost"
        elif job_policy == "fast":
            target, reason = "Queued", "ClusterDrained"
        elif state != "Preempting":
            target, reason = "Preempting", "ClusterDrained"  # requeued once its pods are gone
        else:
            continue
        message = "failurePolicy.onClusterFailure: fail" if target == "Failed" else ""
        step = Step(target, reason, message)
        moves.append(JobChange(job_id, version, state, (step,), clear_cluster=target == "Queued"))
        changed.append(f"job {job_id} {state} -> {target} ({reason})")
    # a lost cluster's jobs move together: three statements however many it ran
    await release_placements(conn, *(m.job_id for m in moves))
    await change_jobs(conn, moves)
    return changed
