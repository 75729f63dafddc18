"""The audit trail over the real hub and database: what is recorded, who may read it, request
ids, and rate limits answered with 429 and Retry-After."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from api import cli
from api.audit import AuditWriter
from federation.hubconfig import Bucket, HubConfig, RateLimits
from federation.store import audit
from federation.store.audit import AuditRecord
from federation.store.database import Database
from federation.store.tables import audit_log
from tests.integration.conftest import ADMIN_TOKEN, Hub, job_manifest, serving_hub

pytestmark = pytest.mark.integration


async def _records(
    hub: Hub, token: str, want: int, having: frozenset[str] = frozenset(), **params: str
) -> list[dict[str, Any]]:
    """The audit records `token` reads, once at least `want` are there and their actions
    include `having` (they are written in the background, within a fraction of a second)."""
    items: list[dict[str, Any]] = []
    for _ in range(100):
        status, body = await hub.call("GET", "/v1/audit", token, params=params)
        assert status == 200, body
        items = body["items"]
        if len(items) >= want and having <= {i["action"] for i in items}:
            return items
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(items)} audit records, wanted {want}: {items}")


async def _member_id(hub: Hub, tenant: str) -> str:
    _, body = await hub.call("GET", "/v1/tokens")
    return str(next(t["id"] for t in body["items"] if t["name"] == f"{tenant}-member"))


async def test_a_submit_a_cancel_and_refusals_are_recorded(hub: Hub) -> None:
    member = await hub.tenant_with_queue("acme")
    status, job = await hub.call(
        "POST", "/v1/jobs", member, json=job_manifest(), headers={"X-Request-Id": "submit-1"}
    )
    assert status == 201
    status, _ = await hub.call("POST", f"/v1/jobs/{job['id']}/cancel", member)
    assert status == 200
    assert (await hub.call("GET", "/v1/jobs", "sp_not_a_token"))[0] == 401
    assert (await hub.call("POST", "/v1/tenants", member, json={"name": "other"}))[0] == 403
    assert (await hub.call("GET", "/v1/jobs", member))[0] == 200  # a read is not recorded

    done = frozenset({"POST submit_job", "POST cancel_job"})
    records = await _records(hub, ADMIN_TOKEN, 3, done, outcome="2xx", tenant="acme")
    refusals = frozenset({"GET list_jobs", "POST create_tenant"})
    records += await _records(hub, ADMIN_TOKEN, 2, refusals, outcome="4xx")
    by_action = {r["action"]: r for r in records}
    actor = await _member_id(hub, "acme")
    submit = by_action["POST submit_job"]
    assert (submit["actor"], submit["role"], submit["tenant"]) == (actor, "member", "acme")
    assert (submit["object"], submit["status"], submit["requestId"]) == (job["id"], 201, "submit-1")
    assert submit["source"] == "127.0.0.1"
    cancel = by_action["POST cancel_job"]
    assert (cancel["actor"], cancel["object"], cancel["status"]) == (actor, job["id"], 200)
    refused = by_action["GET list_jobs"]
    assert (refused["actor"], refused["tenant"], refused["status"]) == (None, None, 401)
    forbidden = by_action["POST create_tenant"]
    assert (forbidden["actor"], forbidden["tenant"], forbidden["status"]) == (actor, "acme", 403)
    assert "GET list_jobs" not in {r["action"] for r in records if r["status"] == 200}
    assert [
        r["action"] for r in await _records(hub, ADMIN_TOKEN, 1, actor=actor, outcome="403")
    ] == ["POST create_tenant"]


async def test_a_tenant_reads_only_its_own_records(hub: Hub) -> None:
    a = await hub.tenant_with_queue("tenant-a")
    b = await hub.tenant_with_queue("tenant-b")
    for token in (a, b):
        assert (await hub.call("POST", "/v1/jobs", token, json=job_manifest()))[0] == 201
    # the admin's own actions on tenant-b (its queue, its token) are filed under tenant-b
    admin_view = await _records(hub, ADMIN_TOKEN, 8)
    assert {r["tenant"] for r in admin_view} >= {"tenant-a", "tenant-b"}
    seen_by_a = await _records(hub, a, 1)
    assert {r["tenant"] for r in seen_by_a} == {"tenant-a"}
    assert any(r["action"] == "POST submit_job" for r in seen_by_a)
    status, body = await hub.call("GET", "/v1/audit", a, params={"tenant": "tenant-b"})
    assert (status, body["items"]) == (200, [])
    b_records = [r for r in admin_view if r["tenant"] == "tenant-b"]
    assert {r["id"] for r in seen_by_a}.isdisjoint(r["id"] for r in b_records)


async def test_the_audit_trail_pages_with_a_cursor_and_refuses_bad_filters(hub: Hub) -> None:
    for name in ("t1", "t2", "t3"):
        assert (await hub.call("POST", "/v1/tenants", json={"name": name}))[0] == 201
    await _records(hub, ADMIN_TOKEN, 3)
    status, first = await hub.call("GET", "/v1/audit", params={"limit": "2"})
    assert status == 200 and len(first["items"]) == 2 and first["nextCursor"]
    _, rest = await hub.call("GET", "/v1/audit", params={"cursor": first["nextCursor"]})
    assert [r["object"] for r in first["items"] + rest["items"]] == ["t3", "t2", "t1"]
    assert [r["tenant"] for r in rest["items"]] == ["t1"]  # filed under the tenant it created
    for params in ({"outcome": "4x"}, {"since": "yesterday"}, {"since": "2026-01-01T00:00:00"}):
        status, problem = await hub.call("GET", "/v1/audit", params=params)
        assert status == 422, params
        assert problem["errors"][0]["path"].startswith("query.")
    _, later = await hub.call("GET", "/v1/audit", params={"since": "2999-01-01T00:00:00Z"})
    assert later["items"] == []


async def test_every_response_carries_a_request_id(hub: Hub) -> None:
    given = await hub.client.get("/healthz", headers={"X-Request-Id": "abc-123.x:y"})
    assert given.headers["X-Request-Id"] == "abc-123.x:y"
    made = [(await hub.client.get("/v1/jobs")).headers["X-Request-Id"] for _ in range(2)]
    assert made[0] != made[1] and all(len(m) == 32 for m in made)
    odd = await hub.client.get("/healthz", headers={"X-Request-Id": "<script>" + "x" * 200})
    assert odd.headers["X-Request-Id"] != "<script>" and len(odd.headers["X-Request-Id"]) == 32


@pytest.fixture
async def limited(db: Database) -> AsyncIterator[Hub]:
    """A hub whose tokens may send a burst of 4 requests, then one every 10 s; a tenant's
    tokens together a burst of 5."""
    limits = RateLimits(True, Bucket(0.1, 4), Bucket(0.1, 5))
    async with serving_hub(db, HubConfig(rate_limits=limits)) as served:
        yield served


async def test_a_token_over_its_burst_gets_429_with_retry_after(limited: Hub) -> None:
    statuses = [(await limited.call("GET", "/v1/tenants"))[0] for _ in range(4)]
    assert statuses == [200] * 4
    resp = await limited.client.get(
        "/v1/tenants", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert resp.status == 429
    assert resp.headers["Content-Type"].startswith("application/problem+json")
    assert 1 <= int(resp.headers["Retry-After"]) <= 10
    assert (await resp.json())["type"].endswith("/rate-limited")
    assert (await limited.call("GET", "/healthz", None))[0] == 200  # health is never limited


async def test_a_tenant_over_its_rate_is_limited_across_its_tokens(limited: Hub) -> None:
    await limited.call("POST", "/v1/tenants", json={"name": "busy"})
    members = []
    for i in range(3):
        _, body = await limited.call(
            "POST", "/v1/tokens", json={"name": f"m{i}", "role": "member", "tenant": "busy"}
        )
        members.append(body["token"])
    statuses = [(await limited.call("GET", "/v1/jobs", m))[0] for m in members * 2]
    assert statuses == [200] * 5 + [429]  # the tenant's burst is 5, each token's 4


async def test_the_cli_lists_the_audit_trail(hub: Hub, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("c1", "c2", "c3"):
        assert (await hub.call("POST", "/v1/tenants", json={"name": name}))[0] == 201
    await _records(hub, ADMIN_TOKEN, 3)
    url = str(hub.client.make_url(""))
    args = ["--hub", url, "--token", ADMIN_TOKEN, "audit", "--action", "POST create_tenant"]
    assert await cli._run(cli.parser().parse_args([*args, "--limit", "2", "-o", "json"])) == 0
    shown = json.loads(capsys.readouterr().out)["items"]
    assert [r["object"] for r in shown] == ["c3", "c2"]
    assert await cli._run(cli.parser().parse_args(args)) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == cli.AUDIT_HEADER
    assert [line.split()[3:6] for line in table[1:]] == [
        ["POST", "create_tenant", name] for name in ("c3", "c2", "c1")
    ]


async def test_hostile_paths_are_recorded_and_never_block_the_trail(hub: Hub) -> None:
    for path in (f"/v1/tenants/{'x' * 300}/queues", "/v1/tenants/a%00b", "/v1/jobs/%00"):
        assert (await hub.call("GET", path))[0] == 404
    assert (await hub.call("POST", "/v1/tenants", json={"name": "after"}))[0] == 201
    records = await _records(hub, ADMIN_TOKEN, 4)
    assert [(r["action"], r["tenant"]) for r in records] == [
        ("POST create_tenant", "after"),
        ("GET get_job", None),
        ("GET get_tenant", None),
        ("GET list_queues", None),
    ]
    assert records[2]["object"] == "ab" and len(records[3]["object"]) == 256


async def test_a_flush_returns_only_after_the_batch_another_flush_is_writing(db: Database) -> None:
    """A batch the background writer has taken off the queue but not yet committed is stored
    when another flush returns (a test that dumps the database flushes first)."""
    writer = AuditWriter(db, timedelta(days=1))
    now = datetime.now(UTC)
    for i in range(3):
        writer.add(AuditRecord(now, None, None, "POST x", f"o{i}", f"r{i}", "127.0.0.1", 201))
    async with db.transaction() as blocker:
        await blocker.exec_driver_sql("LOCK TABLE audit_log IN EXCLUSIVE MODE")
        writing = asyncio.create_task(writer.flush())  # takes the batch, waits on the lock
        await asyncio.sleep(0.2)
        second = asyncio.create_task(writer.flush())  # finds the queue empty
        await asyncio.sleep(0.2)
        assert not writing.done() and not second.done()
    await asyncio.wait_for(second, 5)
    async with db.connection() as conn:
        stored = (await conn.execute(sa.select(sa.func.count()).select_from(audit_log))).scalar()
    assert stored == 3
    await writing


async def test_a_batch_is_filed_under_each_records_tenant_in_order(hub: Hub) -> None:
    """By the tenant id given, else the tenant of the job acted on, else the tenant named;
    a known tenant's own name is stored, an unknown one's name as given."""
    member = await hub.tenant_with_queue("acme")
    status, job = await hub.call("POST", "/v1/jobs", member, json=job_manifest())
    assert status == 201
    async with hub.db.connection() as conn:
        acme = (await conn.execute(sa.text("SELECT id FROM tenants WHERE name = 'acme'"))).scalar()
    now = datetime.now(UTC)
    given: list[dict[str, Any]] = [
        {"tenant_id": acme, "tenant": "stale-name"},
        {"job_id": uuid.UUID(job["id"])},
        {"tenant": "acme"},
        {"tenant": "nobody"},
        {"job_id": uuid.uuid4()},
        {},
    ]
    batch = [
        AuditRecord(now, "x", "admin", "POST a", str(i), f"r{i}", "127.0.0.1", 200, **fields)
        for i, fields in enumerate(given)
    ]
    async with hub.db.transaction() as conn:
        await audit.append(conn, batch)
    async with hub.db.connection() as conn:
        rows = (
            await conn.execute(
                sa.select(
                    audit_log.c.object, audit_log.c.tenant_id, audit_log.c.tenant, audit_log.c.at
                )
                .where(audit_log.c.request_id.like("r%"))
                .order_by(audit_log.c.id)
            )
        ).all()
    assert [tuple(r) for r in rows] == [
        ("0", acme, "acme", now),
        ("1", acme, "acme", now),
        ("2", acme, "acme", now),
        ("3", None, "nobody", now),
        ("4", None, None, now),
        ("5", None, None, now),
    ]
