"""`suanpan-hub migrate` recompiles jobs stored in an older compiled form (version 1 had no pod
template), so the loop never meets a form it cannot read."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from federation.catalog import load_catalog
from federation.compiled import CompiledJob
from federation.store.backfill import compile_uncompiled
from federation.store.tables import jobs
from tests.integration.conftest import Hub, job_manifest

pytestmark = pytest.mark.integration


async def test_a_job_of_compiled_version_1_is_recompiled(hub: Hub, pg_url: str) -> None:
    token = await hub.tenant_with_queue("acme")
    status, job = await hub.call("POST", "/v1/jobs", token, json=job_manifest())
    assert status == 201, job
    job_id = uuid.UUID(job["id"])
    old = {"version": 1, "tasks": [{"name": "worker", "command": [], "env": {}}]}
    async with hub.db.transaction() as conn:
        await conn.execute(sa.update(jobs).where(jobs.c.id == job_id).values(compiled=old))
    assert await compile_uncompiled(pg_url, load_catalog()) == (1, 0)
    async with hub.db.connection() as conn:
        stored = await conn.scalar(sa.select(jobs.c.compiled).where(jobs.c.id == job_id))
    (task,) = CompiledJob.model_validate(stored).tasks
    assert (task.container, task.pod.spec.containers[0].name) == ("worker", "worker")
    assert await compile_uncompiled(pg_url, load_catalog()) == (0, 0)
