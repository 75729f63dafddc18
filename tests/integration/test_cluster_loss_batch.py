"""A lost cluster's jobs move together: every one requeued (or failed, by its policy) with its
placement released and its event written, in a number of statements that does not grow with
the number of jobs the cluster ran."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from federation.controllers import health
from federation.hubconfig import HealthConfig
from federation.store import agents
from federation.store import jobs as job_store
from federation.store.clusters import ensure_cluster
from federation.store.database import Database
from federation.store.lifecycle import NewPlacement, move_job, place_jobs
from federation.store.tables import events, jobs, placements
from federation.wire.agent import Registration
from tests.integration.conftest import statements_sent, store_queue, stored_job

pytestmark = pytest.mark.integration

JOBS = 300


async def test_a_lost_clusters_jobs_move_in_a_constant_number_ofstatements_sent(
    db: Database,
) -> None:
    tenant, queue = await store_queue(db)
    async with db.transaction() as conn:
        cluster_id = await ensure_cluster(conn, "lost")
        await agents.register(conn, cluster_id, Registration(cluster="lost"))
        submitted = [
            (await job_store.submit(conn, stored_job(tenant, queue)))[0] for _ in range(JOBS)
        ]
        await place_jobs(
            conn,
            [
                NewPlacement(j.id, j.version, cluster_id, 1, {"w": None}, [], "", {})
                for j in submitted
            ],
        )
        ids = [j.id for j in submitted]
        for job_id in ids[::3]:  # a third of them running
            await move_job(conn, job_id, "Dispatched", reason="Dispatched")
            await move_job(conn, job_id, "Running", reason="Running")
        failing = ids[1::5]  # these fail rather than run elsewhere
        await conn.execute(
            sa.update(jobs)
            .where(jobs.c.id.in_(failing))
            .values(compiled={"failurePolicy": {"onClusterFailure": "fail"}})
        )
        await conn.execute(
            sa.update(jobs)
            .where(jobs.c.id.in_(ids[2::5]))
            .values(compiled={"failover": "exclusive"})  # silent past its margin too
        )
        await conn.exec_driver_sql(
            "UPDATE clusters SET last_heartbeat = now() - interval '10 minutes'"
        )
    since = datetime.now(UTC) - timedelta(minutes=20)
    with statements_sent(db) as sent:
        async with db.transaction() as conn:
            changed = await health.check(conn, HealthConfig(), since)
    assert "lost Offline" in changed
    async with db.connection() as conn:
        states = dict(
            (await conn.execute(sa.select(jobs.c.id, jobs.c.state).where(jobs.c.id.in_(ids)))).all()
        )
        active = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(placements)
            .where(placements.c.cluster_id == cluster_id, placements.c.state == "Active")
        )
        lost_events = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(events)
            .where(events.c.job_id.in_(ids), events.c.reason == "ClusterLost")
        )
        held = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(jobs)
            .where(jobs.c.id.in_(ids), jobs.c.cluster_id.is_not(None))
        )
    assert {states[i] for i in failing} == {"Failed"}
    assert {states[i] for i in set(ids) - set(failing)} == {"Queued"}
    assert active == 0 and lost_events == JOBS
    assert held == len(failing)  # a requeued job holds no cluster; a failed one says where
    assert len(sent) < 30, len(sent)  # not per job
