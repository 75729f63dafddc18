"""Tenant isolation and roles, checked on every operation of the API."""

from __future__ import annotations

import pytest

from api.registry import Operation
from api.routes import API
from tests.integration.conftest import Hub, job_manifest, service_manifest

pytestmark = pytest.mark.integration

PROTECTED = [op for op in API.operations if op.roles]
USER_OPS = [op for op in PROTECTED if not op.path.startswith("/v1/agent/")]
AGENT_OPS = [op for op in PROTECTED if op.path.startswith("/v1/agent/")]


async def _world(hub: Hub) -> dict[str, str]:
    """Tenants a and b with a job and a service each, an agent token, a viewer token."""
    names: dict[str, str] = {}
    for tenant in ("a", "b"):
        names[f"{tenant}_token"] = await hub.tenant_with_queue(tenant)
        _, job = await hub.call(
            "POST", "/v1/jobs", names[f"{tenant}_token"], json=job_manifest(f"{tenant}-job")
        )
        names[f"{tenant}_job"] = job["id"]
        _, service = await hub.call(
            "POST", "/v1/services", names[f"{tenant}_token"], json=service_manifest(f"{tenant}-svc")
        )
        names[f"{tenant}_service"] = service["id"]
    _, agent = await hub.call(
        "POST", "/v1/tokens", json={"name": "agent-x", "role": "agent", "cluster": "x"}
    )
    _, viewer = await hub.call("POST", "/v1/tokens", json={"name": "v", "role": "viewer"})
    names["agent"] = agent["token"]
    names["viewer"] = viewer["token"]
    return names


def _concrete(path: str, job: str, tenant: str, service: str = "a-svc") -> str:
    return (
        path.replace("{job_id}", job)
        .replace("{service}", service)
        .replace("{tenant}", tenant)
        .replace("{queue}", "default")
        .replace("{cluster}", "x")
        .replace("{token_id}", "00000000-0000-0000-0000-000000000000")
        .replace("{request_id}", "00000000-0000-0000-0000-000000000000")
    )


@pytest.mark.parametrize("op", USER_OPS, ids=[f"{o.method} {o.path}" for o in USER_OPS])
async def test_a_member_never_sees_nor_touches_another_tenant(hub: Hub, op: Operation) -> None:
    w = await _world(hub)
    for service in (w["a_service"], "a-svc"):
        path = _concrete(op.path, w["a_job"], "a", service)
        status, body = await hub.call(op.method, path, w["b_token"], json={})
        if "member" not in op.roles:
            assert status == 403, body
        elif any(p in op.path for p in ("{job_id}", "{tenant}", "{service}")):
            assert status in (404, 422), body  # a's objects do not exist for b
            assert status == 404 or op.body is not None
        else:
            assert status in (200, 201, 422), body
            assert "a-job" not in str(body) and '"a"' not in str(body)
            assert "a-svc" not in str(body)
    # a's job and service are untouched whatever b tried
    _, job = await hub.call("GET", f"/v1/jobs/{w['a_job']}")
    assert job["state"] == "Queued" and job["version"] == 1
    _, service = await hub.call("GET", f"/v1/services/{w['a_service']}")
    assert service["state"] == "Active" and service["version"] == 1


@pytest.mark.parametrize("op", USER_OPS, ids=[f"{o.method} {o.path}" for o in USER_OPS])
async def test_agent_and_viewer_tokens_write_nothing_here(hub: Hub, op: Operation) -> None:
    w = await _world(hub)
    path = _concrete(op.path, w["a_job"], "a")
    status, _ = await hub.call(op.method, path, w["agent"], json={})
    assert status == 403
    if op.method != "GET":
        status, _ = await hub.call(op.method, path, w["viewer"], json={})
        assert status == 403


@pytest.mark.parametrize("op", PROTECTED, ids=[f"{o.method} {o.path}" for o in PROTECTED])
async def test_no_token_is_401_and_a_bad_token_too(hub: Hub, op: Operation) -> None:
    path = _concrete(op.path, "00000000-0000-0000-0000-000000000000", "a")
    assert (await hub.call(op.method, path, None))[0] == 401
    assert (await hub.call(op.method, path, "sp_wrong"))[0] == 401


async def test_listings_show_only_the_members_tenant(hub: Hub) -> None:
    w = await _world(hub)
    _, jobs = await hub.call("GET", "/v1/jobs", w["b_token"])
    assert [j["name"] for j in jobs["items"]] == ["b-job"]
    _, tenants = await hub.call("GET", "/v1/tenants", w["b_token"])
    assert [t["name"] for t in tenants["items"]] == ["b"]
    _, queues = await hub.call("GET", "/v1/queues", w["b_token"])
    assert {q["tenant"] for q in queues["items"]} == {"b"}
    status, _ = await hub.call("GET", "/v1/jobs", w["b_token"], params={"tenant": "a"})
    assert status == 404
    _, everything = await hub.call("GET", "/v1/jobs", w["viewer"])
    assert sorted(j["name"] for j in everything["items"]) == ["a-job", "b-job"]


async def test_submitting_into_another_tenant_is_not_found(hub: Hub) -> None:
    w = await _world(hub)
    manifest = job_manifest("sneaky")
    manifest["metadata"]["tenant"] = "a"
    status, _ = await hub.call("POST", "/v1/jobs", w["b_token"], json=manifest)
    assert status == 404
    service = service_manifest("sneaky")
    service["metadata"]["tenant"] = "a"
    status, _ = await hub.call("POST", "/v1/services", w["b_token"], json=service)
    assert status == 404


async def test_a_member_cannot_change_another_tenants_service_with_a_valid_manifest(
    hub: Hub,
) -> None:
    w = await _world(hub)
    for ref in (w["a_service"], "a-svc"):
        status, _ = await hub.call(
            "PUT", f"/v1/services/{ref}", w["b_token"], json=service_manifest("a-svc")
        )
        assert status == 404
        assert (await hub.call("DELETE", f"/v1/services/{ref}", w["b_token"]))[0] == 404
        assert (await hub.call("GET", f"/v1/services/{ref}/endpoints", w["b_token"]))[0] == 404
    _, services = await hub.call("GET", "/v1/services", w["b_token"])
    assert [s["name"] for s in services["items"]] == ["b-svc"]
    assert (await hub.call("GET", "/v1/services", w["b_token"], params={"tenant": "a"}))[0] == 404
    _, service = await hub.call("GET", f"/v1/services/{w['a_service']}")
    assert service["state"] == "Active" and service["version"] == 1


async def test_revoked_token_stops_working_at_once(hub: Hub) -> None:
    _, issued = await hub.call("POST", "/v1/tokens", json={"name": "tmp", "role": "viewer"})
    assert (await hub.call("GET", "/v1/jobs", issued["token"]))[0] == 200
    assert (await hub.call("DELETE", f"/v1/tokens/{issued['id']}"))[0] == 204
    assert (await hub.call("GET", "/v1/jobs", issued["token"]))[0] == 401


@pytest.mark.parametrize("op", AGENT_OPS, ids=[f"{o.method} {o.path}" for o in AGENT_OPS])
async def test_only_agent_tokens_reach_the_agent_protocol(hub: Hub, op: Operation) -> None:
    w = await _world(hub)
    for token in ("sp_test_admin_token", w["a_token"], w["viewer"]):
        status, _ = await hub.call(op.method, _concrete(op.path, "x", "x"), token, json={})
        assert status == 403


async def test_an_agent_cannot_register_as_another_cluster(hub: Hub) -> None:
    w = await _world(hub)
    await hub.call("POST", "/v1/tokens", json={"name": "agent-y", "role": "agent", "cluster": "y"})
    status, _ = await hub.call("POST", "/v1/agent/register", w["agent"], json={"cluster": "y"})
    assert status == 403
    status, reply = await hub.call("POST", "/v1/agent/register", w["agent"], json={"cluster": "x"})
    assert status == 200 and reply["cluster"] == "x"
