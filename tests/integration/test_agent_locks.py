"""A lease renewal does not wait behind the cluster's other traffic.

It is one statement taking a `FOR NO KEY UPDATE` row lock: a transaction that only references
the cluster (inserting its nodes takes `FOR KEY SHARE` through the foreign key) or that applies
a status report of its jobs must not hold it up.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
import sqlalchemy as sa

from federation.store import agents
from federation.store import jobs as job_store
from federation.store.clusters import ensure_cluster
from federation.store.database import Database
from federation.store.lifecycle import NewPlacement, clusters_silent, place_jobs
from federation.store.tables import clusters, nodes
from federation.wire.agent import LeaseRenewal, Registration, StatusUpdate
from tests.integration.conftest import store_queue, stored_job

pytestmark = pytest.mark.integration

RENEWAL = LeaseRenewal(apiserver_reachable=True)


async def _registered(db: Database) -> uuid.UUID:
    name = f"c-{uuid.uuid4().hex[:8]}"
    async with db.transaction() as conn:
        cluster_id = await ensure_cluster(conn, name)
        await agents.register(conn, cluster_id, Registration(cluster=name))
    return cluster_id


async def _renewed_within(db: Database, cluster_id: uuid.UUID, seconds: float) -> None:
    async with db.connection() as conn:
        await asyncio.wait_for(agents.heartbeat(conn, cluster_id, RENEWAL), seconds)


async def test_a_lease_does_not_wait_for_a_transaction_that_references_the_cluster(
    db: Database,
) -> None:
    cluster_id = await _registered(db)
    async with db.transaction() as holder:
        await holder.execute(
            sa.insert(nodes).values(
                cluster_id=cluster_id, name="n0", cpu_milli=1000, memory_mib=1024
            )
        )
        await _renewed_within(db, cluster_id, 5.0)


async def test_a_lease_does_not_wait_for_a_status_report(db: Database) -> None:
    cluster_id = await _registered(db)
    tenant, queue = await store_queue(db)
    async with db.transaction() as conn:
        job, _ = await job_store.submit(conn, stored_job(tenant, queue))
        await place_jobs(
            conn,
            [NewPlacement(job.id, job.version, cluster_id, 1, {"w": None}, [], "placed", {})],
        )
    async with db.transaction() as report:
        update = StatusUpdate(job=job.id, epoch=1, state="Succeeded")
        assert [o.kind for o in await agents.apply_statuses(report, cluster_id, [update])] == [
            "applied"
        ]
        await _renewed_within(db, cluster_id, 5.0)


async def test_a_lease_brings_a_not_ready_cluster_back_once_it_reaches_its_apiserver(
    db: Database,
) -> None:
    cluster_id = await _registered(db)
    async with db.transaction() as conn:
        assert await clusters_silent(conn, "Ready", "NotReady", after_s=-60)

    async def renew(renewal: LeaseRenewal) -> tuple[str | None, str, int]:
        async with db.connection() as conn:
            await agents.heartbeat(conn, cluster_id, renewal)
            row = (
                await conn.execute(
                    sa.select(clusters.c.state, clusters.c.version).where(
                        clusters.c.id == cluster_id
                    )
                )
            ).one()
            problem = await conn.scalar(
                sa.select(clusters.c.apiserver_problem).where(clusters.c.id == cluster_id)
            )
        return problem, row.state, row.version

    problem, state, version = await renew(
        LeaseRenewal(apiserver_reachable=False, problem="dial tcp: refused")
    )
    assert (problem, state) == ("dial tcp: refused", "NotReady")  # no work while unreachable
    assert await renew(RENEWAL) == (None, "Ready", version + 1)
    assert await renew(RENEWAL) == (None, "Ready", version + 1)  # Ready stays, no new version
