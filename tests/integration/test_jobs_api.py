"""The job API on real PostgreSQL: submit, read, list, paginate, cancel, events."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.conftest import Hub, job_manifest

pytestmark = pytest.mark.integration


async def test_submit_then_get_returns_the_queued_job(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    status, job = await hub.call("POST", "/v1/jobs", token, json=job_manifest())
    assert status == 201
    assert job["state"] == "Queued"
    assert job["tenant"] == "acme" and job["queue"] == "default"
    assert job["priorityClass"] == "normal" and job["priority"] == 0
    status, again = await hub.call("GET", f"/v1/jobs/{job['id']}", token)
    assert status == 200 and again["id"] == job["id"]
    assert again["spec"]["spec"]["tasks"][0]["replicas"] == 2


async def test_yaml_body_is_accepted(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    manifest = """
apiVersion: suanpan.io/v1
kind: Job
metadata: {name: prep}
spec:
  queue: default
  priorityClass: low
  tasks:
  - name: etl
    image: python:3.11
    resources: {cpu: 500m, memory: 2Gi}
"""
    status, job = await hub.call(
        "POST", "/v1/jobs", token, data=manifest, headers={"Content-Type": "application/yaml"}
    )
    assert status == 201, job
    assert job["preemptible"] is True  # the default of class "low"


async def test_same_idempotency_key_twice_gives_one_job(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    headers = {"Idempotency-Key": "run-42"}
    first = await hub.call("POST", "/v1/jobs", token, json=job_manifest(), headers=headers)
    second = await hub.call("POST", "/v1/jobs", token, json=job_manifest(), headers=headers)
    assert (first[0], second[0]) == (201, 200)
    assert first[1]["id"] == second[1]["id"]
    _, page = await hub.call("GET", "/v1/jobs", token)
    assert len(page["items"]) == 1


async def test_concurrent_submissions_with_one_key_create_one_job(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    headers = {"Idempotency-Key": "burst"}
    results = await asyncio.gather(
        *(
            hub.call("POST", "/v1/jobs", token, json=job_manifest(), headers=headers)
            for _ in range(8)
        )
    )
    assert sorted(s for s, _ in results).count(201) == 1
    assert len({body["id"] for _, body in results}) == 1


async def test_same_key_with_another_body_is_a_conflict_and_writes_nothing(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    headers = {"Idempotency-Key": "k1"}
    await hub.call("POST", "/v1/jobs", token, json=job_manifest("a"), headers=headers)
    status, problem = await hub.call(
        "POST", "/v1/jobs", token, json=job_manifest("b"), headers=headers
    )
    assert status == 409
    assert problem["type"].endswith("/conflict")
    _, page = await hub.call("GET", "/v1/jobs", token)
    assert [j["name"] for j in page["items"]] == ["a"]


async def test_list_filters_and_paginates_with_a_cursor(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    for i in range(7):
        labels = {"team": "cv" if i % 2 else "nlp"}
        manifest = job_manifest(f"job-{i}")
        manifest["metadata"]["labels"] = labels
        assert (await hub.call("POST", "/v1/jobs", token, json=manifest))[0] == 201
    seen: list[str] = []
    cursor = None
    while True:
        query = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        status, page = await hub.call("GET", "/v1/jobs", token, params=query)
        assert status == 200
        seen += [j["name"] for j in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [f"job-{i}" for i in reversed(range(7))]
    _, cv = await hub.call("GET", "/v1/jobs", token, params={"label": "team=cv"})
    assert sorted(j["name"] for j in cv["items"]) == ["job-1", "job-3", "job-5"]
    _, queued = await hub.call("GET", "/v1/jobs", token, params={"state": "Queued,Running"})
    assert len(queued["items"]) == 7
    _, none = await hub.call("GET", "/v1/jobs", token, params={"state": "Succeeded"})
    assert none["items"] == []


async def test_list_filters_by_vendor_and_cluster_over_every_page(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    for i in range(5):
        manifest = job_manifest(f"both-{i}")
        if i % 2:  # NVIDIA only
            accelerators = manifest["spec"]["tasks"][0]["resources"]["accelerators"]
            accelerators["anyOf"] = [{"flavor": "nvidia/H100*"}]
        assert (await hub.call("POST", "/v1/jobs", token, json=manifest))[0] == 201
    cpu_only = job_manifest("etl")
    etl = cpu_only["spec"]["tasks"][0]
    del etl["resources"]["accelerators"], etl["images"]
    etl["image"] = "python:3.11"
    assert (await hub.call("POST", "/v1/jobs", token, json=cpu_only))[0] == 201

    async def names(**query: str) -> list[str]:
        seen: list[str] = []
        cursor = None
        while True:
            params = {"limit": "1", **query, **({"cursor": cursor} if cursor else {})}
            status, page = await hub.call("GET", "/v1/jobs", token, params=params)
            assert status == 200, page
            seen += [j["name"] for j in page["items"]]
            if (cursor := page["nextCursor"]) is None:
                return seen

    assert await names(vendor="huawei") == ["both-4", "both-2", "both-0"]
    assert await names(vendor="nvidia") == [f"both-{i}" for i in reversed(range(5))]
    assert await names(vendor="cambricon") == []
    assert await names(cluster="beijing-a") == []  # nothing placed: no hub loop here
    status, problem = await hub.call("GET", "/v1/jobs", token, params={"vendor": "Huawei!"})
    assert status == 422 and "vendor" in problem["detail"], problem


async def test_cancel_is_idempotent_and_recorded_in_events(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    _, job = await hub.call("POST", "/v1/jobs", token, json=job_manifest())
    first = await hub.call("POST", f"/v1/jobs/{job['id']}/cancel", token)
    second = await hub.call("POST", f"/v1/jobs/{job['id']}/cancel", token)
    assert first[0] == second[0] == 200
    assert first[1]["state"] == second[1]["state"] == "Cancelled"
    assert second[1]["version"] == first[1]["version"]
    _, events = await hub.call("GET", f"/v1/jobs/{job['id']}/events", token)
    assert [e["reason"] for e in events["items"]] == ["Submitted", "Cancelled"]


async def test_explain_of_a_fresh_job_says_it_waits(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    _, job = await hub.call("POST", "/v1/jobs", token, json=job_manifest())
    status, why = await hub.call("GET", f"/v1/jobs/{job['id']}/explain", token)
    assert status == 200
    assert why["state"] == "Queued" and why["clusters"] == []


async def test_the_web_view_is_served_and_calls_only_existing_operations(hub: Hub) -> None:
    import re

    from api.routes import API

    status, page = await hub.call("GET", "/ui", None)
    assert status == 200 and "<title>Suanpan</title>" in page
    status, script = await hub.call("GET", "/ui/console.js", None)
    assert status == 200
    called = {
        re.sub(r"\$\{[^}]+\}", "{}", path) for path in re.findall(r'[`"](/v1/[^`"?]+)', script)
    }
    known = {re.sub(r"\{[^}]+\}", "{}", op.path) for op in API.operations}
    assert called and called <= known, called - known


async def test_a_queues_waiting_jobs_are_listed_in_the_schedulers_order(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    ids = {}
    for name, priority in (("old", "normal"), ("low", "low"), ("new", "normal"), ("hot", "high")):
        status, job = await hub.call(
            "POST", "/v1/jobs", token, json=job_manifest(name, priorityClass=priority)
        )
        assert status == 201
        ids[name] = job["id"]
    await hub.call("POST", f"/v1/jobs/{ids['new']}/cancel", token)
    status, waiting = await hub.call("GET", "/v1/tenants/acme/queues/default/waiting", token)
    assert status == 200
    assert [(w["position"], w["name"]) for w in waiting["items"]] == [
        (1, "hot"),
        (2, "old"),
        (3, "low"),
    ]
    status, first = await hub.call("GET", "/v1/tenants/acme/queues/default/waiting?limit=1")
    assert status == 200 and [w["name"] for w in first["items"]] == ["hot"]


@pytest.mark.parametrize(
    ("path", "status", "field"),
    [
        ("/v1/tenants/acme/queues/nope/waiting", 404, None),
        ("/v1/tenants/nope/queues/default/waiting", 404, None),
        ("/v1/tenants/acme/queues/default/waiting?limit=0", 422, "query.limit"),
        ("/v1/tenants/acme/queues/default/waiting?limit=+5", 422, "query.limit"),
        ("/v1/tenants/acme/queues/default/waiting?limit=1001", 422, "query.limit"),
    ],
)
async def test_bad_waiting_requests_get_a_precise_problem(
    hub: Hub, path: str, status: int, field: str | None
) -> None:
    await hub.tenant_with_queue("acme")
    got, problem = await hub.call("GET", path)
    assert got == status and problem["status"] == status
    if field is not None:
        assert [e["path"] for e in problem["errors"]] == [field]


async def test_whoami_names_the_role_and_tenant_of_the_token(hub: Hub) -> None:
    member = await hub.tenant_with_queue("acme")
    admin = {"role": "admin", "tenant": None, "subject": None}  # subject: OIDC users only
    assert await hub.call("GET", "/v1/whoami") == (200, admin)
    assert await hub.call("GET", "/v1/whoami", member) == (
        200,
        {"role": "member", "tenant": "acme", "subject": None},
    )
    status, _ = await hub.call("GET", "/v1/whoami", None)
    assert status == 401


async def test_allocation_history_returns_the_samples_of_the_window(hub: Hub) -> None:
    from datetime import UTC, datetime, timedelta

    from federation.store import history
    from federation.store.tables import allocation_history

    now = datetime.now(UTC)
    async with hub.db.transaction() as conn:
        await conn.execute(
            allocation_history.insert(),
            [
                {
                    "taken_at": now - timedelta(seconds=s),
                    "cluster": "a",
                    "flavor": "nvidia/H100",
                    "total": 8,
                    "healthy": 8,
                    "allocated_milli": 1000 * s,
                }
                for s in (7200, 600, 60)
            ],
        )
        assert await history.record(conn, now, timedelta(hours=1)) == 0  # no clusters yet
    status, body = await hub.call("GET", "/v1/allocation-history", params={"seconds": "900"})
    assert status == 200
    assert [s["allocatedMilli"] for s in body["items"]] == [600000, 60000]
    assert body["intervalSeconds"] == 60 and body["keepSeconds"] == 86400
    status, body = await hub.call("GET", "/v1/allocation-history", params={"seconds": "86400"})
    assert len(body["items"]) == 2  # the sample older than `keep` was dropped by `record`


@pytest.mark.parametrize("seconds", ["0", "-1", "1h", "7776001"])
async def test_a_bad_history_window_is_a_precise_problem(hub: Hub, seconds: str) -> None:
    status, problem = await hub.call("GET", "/v1/allocation-history", params={"seconds": seconds})
    assert status == 422 and [e["path"] for e in problem["errors"]] == ["query.seconds"]
