"""Fixtures for API tests: the real hub application over the real database."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web_runner import BaseRunner

from api.app import create_app
from api.security import HubRunner
from deploy.fleet import Fleet
from federation.compiled import CompiledJob
from federation.compiler import shard_form
from federation.hubconfig import HubConfig
from federation.store import jobs as job_store
from federation.store import tenancy
from federation.store.bootstrap import ensure_admin_token
from federation.store.clusters import ensure_cluster
from federation.store.database import Database
from federation.store.lifecycle import NewPlacement, place_jobs
from federation.store.records import Queue, Tenant
from federation.store.tables import clusters, jobs, placements, service_endpoints, services

ADMIN_TOKEN = "sp_test_admin_token"


@dataclass
class Hub:
    """A running hub and a client; `call` sends a request with a given token."""

    client: TestClient[Any, Any]
    db: Database

    async def call(
        self, method: str, path: str, token: str | None = ADMIN_TOKEN, **kwargs: Any
    ) -> tuple[int, Any]:
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        resp = await self.client.request(method, path, headers=headers, **kwargs)
        ctype = resp.headers.get("Content-Type", "")
        body = await resp.json(content_type=None) if "json" in ctype else await resp.text()
        return resp.status, body

    async def tenant_with_queue(
        self, tenant: str, queue: str = "default", quota: dict[str, Any] | None = None
    ) -> str:
        """Create a tenant with one queue and return a member token for it."""
        status, _ = await self.call("POST", "/v1/tenants", json={"name": tenant})
        assert status == 201
        status, _ = await self.call(
            "POST", f"/v1/tenants/{tenant}/queues", json={"name": queue, "quota": quota or {}}
        )
        assert status == 201
        status, body = await self.call(
            "POST",
            "/v1/tokens",
            json={"name": f"{tenant}-member", "role": "member", "tenant": tenant},
        )
        assert status == 201
        return str(body["token"])


class HubTestServer(TestServer):
    """A test server with the hub's own connection handling (as `suanpan-hub serve` runs)."""

    async def _make_runner(self, **kwargs: Any) -> BaseRunner:
        return HubRunner(self.app, **kwargs)


@asynccontextmanager
async def serving_hub(db: Database, config: HubConfig | None = None) -> AsyncIterator[Hub]:
    """The hub app (with `config`) on a loopback port with a bootstrap admin token."""
    await ensure_admin_token(db, ADMIN_TOKEN)
    app = create_app(db, config=config)
    client: TestClient[Any, Any] = TestClient(HubTestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        yield Hub(client, db)
    finally:
        await client.close()


@pytest.fixture
async def hub(db: Database) -> AsyncIterator[Hub]:
    """The hub app on a loopback port with a bootstrap admin token."""
    async with serving_hub(db) as served:
        yield served


def job_manifest(name: str = "train", queue: str = "default", **spec: Any) -> dict[str, Any]:
    """A small valid job manifest; keyword arguments override `spec` fields."""
    body: dict[str, Any] = {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"team": "nlp"}},
        "spec": {
            "queue": queue,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "images": {"huawei": "mindspore:2.3", "nvidia": "pytorch:2.4"},
                    "resources": {
                        "cpu": "8",
                        "memory": "64Gi",
                        "accelerators": {
                            "count": 8,
                            "anyOf": [{"flavor": "huawei/Ascend910B3"}, {"flavor": "nvidia/H100*"}],
                        },
                    },
                }
            ],
        },
    }
    body["spec"].update(spec)
    return body


def service_manifest(name: str = "chat", queue: str = "default", **spec: Any) -> dict[str, Any]:
    """A valid service: a vLLM-like server on 2 to 8 H100s spread over 2 clusters, scaled on
    the requests each replica runs; keyword arguments override `spec` fields."""
    body: dict[str, Any] = {
        "apiVersion": "suanpan.io/v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"team": "nlp"}},
        "spec": {
            "queue": queue,
            "ports": [{"name": "http", "port": 8000}],
            "spread": {"clusters": 2},
            "autoscaling": {
                "metric": {"name": "vllm:num_requests_running", "target": 4, "port": 8000}
            },
            "server": {
                "minReplicas": 1,
                "maxReplicas": 8,
                "image": "vllm/vllm-openai:v0.6.3",
                "resources": {
                    "cpu": "8",
                    "memory": "64Gi",
                    "accelerators": {"count": 1, "anyOf": [{"flavor": "nvidia/H100*"}]},
                },
            },
        },
    }
    body["spec"].update(spec)
    return body


async def service_shard(
    hub: Hub, service_id: str, n: int, cluster: str, *, held: int, cap: int, serving: bool
) -> uuid.UUID:
    """A placed shard of the service on `cluster` (region eu-`cluster`), holding `held`
    replicas, with (if `serving`) its cluster's report: held ready, 3 requests per replica."""
    async with hub.db.transaction() as conn:
        row = (
            await conn.execute(sa.select(services).where(services.c.id == uuid.UUID(service_id)))
        ).one()
        cluster_id = await ensure_cluster(conn, cluster)
        await conn.execute(
            sa.update(clusters).where(clusters.c.id == cluster_id).values(region=f"eu-{cluster}")
        )
        compiled = shard_form(CompiledJob.model_validate(row.compiled), (cluster,))
        job, _ = await job_store.submit(
            conn,
            job_store.NewJob(
                tenant_id=row.tenant_id,
                tenant="",
                queue_id=row.queue_id,
                queue="",
                name=f"{row.name}-{n}",
                labels={},
                spec={},
                compiled=compiled.model_dump(mode="json", by_alias=True),
                priority=row.priority,
                priority_class=row.priority_class,
                preemptible=row.preemptible,
                tasks=[("server", 1)],
            ),
        )
        await conn.execute(
            sa.update(jobs).where(jobs.c.id == job.id).values(service_id=row.id, replica_cap=cap)
        )
        await place_jobs(
            conn, [NewPlacement(job.id, job.version, cluster_id, 1, {"server": None}, [], "", {})]
        )
        await conn.execute(
            sa.update(placements)
            .where(placements.c.job_id == job.id)
            .values(assignment=placements.c.assignment + {"replicas": {"server": held}})
        )
        if serving:
            await conn.execute(
                sa.insert(service_endpoints).values(
                    job_id=job.id,
                    epoch=1,
                    cluster_id=cluster_id,
                    address=f"{row.name}.acme.svc.cluster.local",
                    cluster_ip="10.96.0.10",
                    ports=[{"name": "http", "port": 8000, "protocol": "TCP"}],
                    ready=held,
                    updated=held,
                    generation=1,
                    metric_sum=3.0 * held,
                    sampled=held,
                )
            )
    return job.id


async def store_queue(db: Database) -> tuple[Tenant, Queue]:
    """A fresh tenant with queue `q`, made in the store (for tests below the API)."""
    async with db.transaction() as conn:
        tenant = await tenancy.create_tenant(conn, f"t-{uuid.uuid4().hex[:8]}")
        queue = await tenancy.create_queue(conn, tenant, "q", cohort=None, weight=1, quota={})
    return tenant, queue


def stored_job(
    tenant: Tenant, queue: Queue, key: str | None = None, digest: str | None = None
) -> job_store.NewJob:
    """A minimal submission for the store (one task `w`, nothing compiled)."""
    return job_store.NewJob(
        tenant_id=tenant.id,
        tenant=tenant.name,
        queue_id=queue.id,
        queue=queue.name,
        name="j",
        labels={},
        spec={},
        compiled={},
        priority=0,
        priority_class="normal",
        preemptible=False,
        tasks=[("w", 1)],
        idempotency_key=key,
        request_hash=digest,
    )


F = TypeVar("F", bound=Fleet)


@asynccontextmanager
async def serving(db: Database, fleet: F) -> AsyncIterator[F]:
    """`fleet`'s hub and loop running under the admin token, with tenant acme and its queue
    default; closed after."""
    await ensure_admin_token(db, ADMIN_TOKEN)
    await fleet.start_hub()
    await fleet.call("POST", "/v1/tenants", json={"name": "acme"})
    await fleet.call("POST", "/v1/tenants/acme/queues", json={"name": "default"})
    fleet.start_loop()
    try:
        yield fleet
    finally:
        await fleet.close()


@contextmanager
def statements_sent(db: Database) -> Iterator[list[str]]:
    """The SQL statements the block sends."""
    sent: list[str] = []

    def count(*args: Any) -> None:
        sent.append(args[2])

    engine = db.engine.sync_engine
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        yield sent
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
