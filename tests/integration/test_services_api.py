"""The service API on real PostgreSQL through the real app: create (idempotent, one live name
per tenant), read by id or name with shards and endpoints, list, update (a new generation only
when the server's pods change) and delete."""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from federation.compiled import CompiledJob
from federation.store import service_shards
from federation.store.tables import jobs, services
from tests.integration.conftest import Hub, service_manifest, service_shard

pytestmark = pytest.mark.integration


async def _create(hub: Hub, token: str, manifest: dict[str, Any]) -> dict[str, Any]:
    status, body = await hub.call("POST", "/v1/services", token, json=manifest)
    assert status == 201, body
    return dict(body)


async def test_create_then_get_by_id_and_by_name(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    resp = await hub.client.post(
        "/v1/services", json=service_manifest(), headers={"Authorization": f"Bearer {token}"}
    )
    assert resp.status == 201
    made = await resp.json()
    assert resp.headers["Location"] == f"/v1/services/{made['id']}"
    assert made["state"] == "Active" and made["tenant"] == "acme" and made["queue"] == "default"
    assert made["desired"] == 2  # max(minReplicas 1, spread 2)
    assert made["generation"] == 1 and made["deletedAt"] is None
    for ref in (made["id"], "chat"):
        status, detail = await hub.call("GET", f"/v1/services/{ref}", token)
        assert status == 200 and detail["id"] == made["id"]
    assert detail["shards"] == [] and detail["ready"] == 0
    assert detail["autoscaling"] == {
        "metric": "vllm:num_requests_running",
        "target": 4.0,
        "average": None,
        "sampled": 0,
        "minReplicas": 1,
        "maxReplicas": 8,
    }
    assert [e["reason"] for e in detail["events"]] == ["Created"]


async def test_a_fixed_service_wants_its_replicas(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    manifest = service_manifest(spread={"clusters": 2})
    del manifest["spec"]["autoscaling"]
    server = manifest["spec"]["server"]
    del server["minReplicas"], server["maxReplicas"]
    server["replicas"] = 3
    made = await _create(hub, token, manifest)
    assert made["desired"] == 3
    _, detail = await hub.call("GET", f"/v1/services/{made['id']}", token)
    assert detail["autoscaling"] is None


async def test_yaml_manifest_is_accepted(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    text = """
apiVersion: suanpan.io/v1
kind: Service
metadata: {name: echo}
spec:
  queue: default
  ports: [{name: http, port: 8080}]
  server:
    replicas: 2
    image: hashicorp/http-echo:1.0
    resources: {cpu: 500m, memory: 256Mi}
"""
    status, made = await hub.call(
        "POST", "/v1/services", token, data=text, headers={"Content-Type": "application/yaml"}
    )
    assert status == 201, made
    assert made["desired"] == 2


async def test_one_idempotency_key_creates_one_service(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    headers = {"Idempotency-Key": "svc-1"}
    results = await asyncio.gather(
        *(
            hub.call("POST", "/v1/services", token, json=service_manifest(), headers=headers)
            for _ in range(6)
        )
    )
    assert sorted(s for s, _ in results) == [200] * 5 + [201]
    assert len({body["id"] for _, body in results}) == 1
    other = service_manifest("other")
    status, problem = await hub.call("POST", "/v1/services", token, json=other, headers=headers)
    assert status == 409 and problem["service"] == results[0][1]["id"]
    _, page = await hub.call("GET", "/v1/services", token)
    assert [s["name"] for s in page["items"]] == ["chat"]


async def test_a_live_name_is_taken_until_the_service_is_deleted(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    first = await _create(hub, token, service_manifest())
    status, problem = await hub.call("POST", "/v1/services", token, json=service_manifest())
    assert status == 409 and problem["service"] == first["id"]
    assert "PUT" in problem["detail"]
    status, gone = await hub.call("DELETE", "/v1/services/chat", token)
    assert status == 202 and gone["state"] == "Deleted" and gone["deletedAt"] is not None
    second = await _create(hub, token, service_manifest())
    assert second["id"] != first["id"]
    _, by_name = await hub.call("GET", "/v1/services/chat", token)
    assert by_name["id"] == second["id"]
    _, old = await hub.call("GET", f"/v1/services/{first['id']}", token)
    assert old["state"] == "Deleted"
    assert [e["reason"] for e in old["events"]] == ["Created", "Deleted"]


async def test_delete_is_idempotent_by_id_and_hides_the_name(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    made = await _create(hub, token, service_manifest())
    first = await hub.call("DELETE", f"/v1/services/{made['id']}", token)
    again = await hub.call("DELETE", f"/v1/services/{made['id']}", token)
    assert (first[0], again[0]) == (202, 202)
    assert first[1]["deletedAt"] == again[1]["deletedAt"]
    assert again[1]["version"] == first[1]["version"] == 2
    assert (await hub.call("DELETE", "/v1/services/chat", token))[0] == 404
    assert (await hub.call("GET", "/v1/services/chat", token))[0] == 404
    _, live = await hub.call("GET", "/v1/services", token)
    assert live["items"] == []
    _, deleted = await hub.call("GET", "/v1/services", token, params={"state": "Deleted"})
    assert [s["id"] for s in deleted["items"]] == [made["id"]]
    status, problem = await hub.call(
        "PUT", f"/v1/services/{made['id']}", token, json=service_manifest()
    )
    assert status == 409 and problem["state"] == "Deleted"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/services/nope",
        f"/v1/services/{uuid.uuid4()}",
        "/v1/services/nope/endpoints",
        f"/v1/services/{uuid.uuid4()}/endpoints",
    ],
)
async def test_unknown_services_are_not_found(hub: Hub, path: str) -> None:
    token = await hub.tenant_with_queue("acme")
    status, problem = await hub.call("GET", path, token)
    assert status == 404 and problem["type"].endswith("/not-found")
    if not path.endswith("/endpoints"):
        assert (await hub.call("DELETE", path, token))[0] == 404
        assert (await hub.call("PUT", path, token, json=service_manifest("nope")))[0] == 404


async def test_list_paginates_newest_first(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    for i in range(5):
        await _create(hub, token, service_manifest(f"svc-{i}"))
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        status, page = await hub.call("GET", "/v1/services", token, params=params)
        assert status == 200 and len(page["items"]) <= 2
        seen += [s["name"] for s in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [f"svc-{i}" for i in reversed(range(5))]


async def test_a_name_two_tenants_use_is_ambiguous_for_an_admin(hub: Hub) -> None:
    a = await hub.tenant_with_queue("a")
    b = await hub.tenant_with_queue("b")
    made = await _create(hub, a, service_manifest())
    await _create(hub, b, service_manifest())
    status, problem = await hub.call("GET", "/v1/services/chat")
    assert status == 409 and len(problem["services"]) == 2
    assert (await hub.call("GET", f"/v1/services/{made['id']}"))[1]["tenant"] == "a"
    _, only_a = await hub.call("GET", "/v1/services", params={"tenant": "a"})
    assert [s["id"] for s in only_a["items"]] == [made["id"]]


async def test_an_admin_names_the_tenant(hub: Hub) -> None:
    await hub.tenant_with_queue("acme")
    status, problem = await hub.call("POST", "/v1/services", json=service_manifest())
    assert status == 422 and problem["errors"][0]["path"] == "metadata.tenant"
    manifest = service_manifest()
    manifest["metadata"]["tenant"] = "acme"
    status, made = await hub.call("POST", "/v1/services", json=manifest)
    assert status == 201 and made["tenant"] == "acme"


async def test_an_update_rolls_only_when_the_servers_pods_change(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    made = await _create(hub, token, service_manifest())
    rescaled = service_manifest(spread={"clusters": 3}, ports=[{"name": "http", "port": 9000}])
    rescaled["spec"]["server"] |= {"minReplicas": 4, "maxReplicas": 6}
    rescaled["spec"]["autoscaling"]["metric"]["target"] = 8
    rescaled["metadata"]["labels"] = {"team": "search"}
    status, updated = await hub.call("PUT", "/v1/services/chat", token, json=rescaled)
    assert status == 200, updated
    assert updated["generation"] == 1 and updated["version"] == 2
    assert updated["desired"] == 4  # was 2: raised to the new minReplicas
    assert updated["labels"] == {"team": "search"}
    assert updated["spec"]["spec"]["ports"][0]["port"] == 9000
    for change in (
        {"image": "vllm/vllm-openai:v0.7.0"},
        {"env": {"VLLM_LOGGING_LEVEL": "DEBUG"}},
        {"resources": {"cpu": "16", "memory": "64Gi"}},
    ):
        rolled = copy.deepcopy(rescaled)
        rolled["spec"]["server"] |= change
        status, updated = await hub.call("PUT", f"/v1/services/{made['id']}", token, json=rolled)
        assert status == 200, updated
        rescaled = rolled
    assert updated["generation"] == 4
    async with hub.db.connection() as conn:
        stored = await conn.scalar(sa.select(services.c.compiled).where(services.c.name == "chat"))
    compiled = CompiledJob.model_validate(stored)
    assert compiled.service is not None and compiled.service.generation == 4
    assert compiled.service.ports[0].port == 9000 and compiled.service.spread == 3
    _, detail = await hub.call("GET", "/v1/services/chat", token)
    assert [e["reason"] for e in detail["events"]] == ["Created"] + ["Updated"] * 4
    assert "roll over" in detail["events"][-1]["message"]
    assert "no pod changes" in detail["events"][1]["message"]


async def test_an_update_keeps_desired_within_the_new_bounds(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    made = await _create(hub, token, service_manifest())
    async with hub.db.transaction() as conn:
        await conn.execute(sa.update(services).values(desired=7))
    narrower = service_manifest()
    narrower["spec"]["server"]["maxReplicas"] = 5
    _, updated = await hub.call("PUT", f"/v1/services/{made['id']}", token, json=narrower)
    assert updated["desired"] == 5


async def test_an_update_hands_the_new_form_to_the_shards(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    made = await _create(hub, token, service_manifest())
    async with hub.db.transaction() as conn:
        (service,) = await service_shards.services_to_run(conn)
        shard = await service_shards.open_shard(conn, service, 0, ("dc-a",), 2)

    async def shard_form() -> CompiledJob:
        async with hub.db.transaction() as conn:
            raw = await conn.scalar(sa.select(jobs.c.compiled).where(jobs.c.id == shard.id))
        return CompiledJob.model_validate(raw)

    _, same = await hub.call("PUT", "/v1/services/chat", token, json=service_manifest())
    assert same["version"] == 1  # the same manifest again changes nothing
    changed = service_manifest()
    changed["spec"]["server"]["image"] = "vllm/vllm-openai:v0.7.0"
    assert (await hub.call("PUT", f"/v1/services/{made['id']}", token, json=changed))[0] == 200
    compiled = await shard_form()
    assert compiled.service is not None and compiled.service.generation == 2
    assert compiled.tasks[0].image == "vllm/vllm-openai:v0.7.0"
    assert compiled.clusters == ("dc-a",)  # the shard keeps the clusters it is confined to


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda m: m["metadata"].update(name="other"), "metadata.name"),
        (lambda m: m["spec"].update(queue="batch"), "spec.queue"),
        (lambda m: m["spec"].update(priorityClass="high"), "spec.priorityClass"),
        (lambda m: m["spec"].update(preemptible=True), "spec.preemptible"),
    ],
    ids=["name", "queue", "priority class", "preemptible"],
)
async def test_an_update_may_not_rename_nor_move_the_service(
    hub: Hub, edit: Any, path: str
) -> None:
    token = await hub.tenant_with_queue("acme")
    await hub.call("POST", "/v1/tenants/acme/queues", json={"name": "batch"})
    made = await _create(hub, token, service_manifest())
    manifest = service_manifest()
    edit(manifest)
    status, problem = await hub.call("PUT", f"/v1/services/{made['id']}", token, json=manifest)
    assert status == 422, problem
    assert [e["path"] for e in problem["errors"]] == [path]
    message = problem["errors"][0]["message"]
    assert "cannot change" in message or "the service's name" in message
    _, same = await hub.call("GET", f"/v1/services/{made['id']}", token)
    assert same["version"] == 1


async def test_detail_and_endpoints_show_each_live_shard(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    made = await _create(hub, token, service_manifest())
    first = await service_shard(hub, made["id"], 0, "c1", held=3, cap=3, serving=True)
    second = await service_shard(hub, made["id"], 1, "c2", held=1, cap=2, serving=True)
    closed = await service_shard(hub, made["id"], 2, "c3", held=1, cap=1, serving=True)
    async with hub.db.transaction() as conn:
        await conn.execute(sa.update(jobs).where(jobs.c.id == closed).values(state="Cancelled"))
    waiting = await service_shard(hub, made["id"], 3, "c4", held=0, cap=1, serving=False)
    _, detail = await hub.call("GET", "/v1/services/chat", token)
    assert detail["ready"] == 4
    assert [
        (s["job"], s["name"], s["cluster"], s["state"], s["held"], s["cap"], s["ready"])
        for s in detail["shards"]
    ] == [
        (str(first), "chat-0", "c1", "Placed", 3, 3, 3),
        (str(second), "chat-1", "c2", "Placed", 1, 2, 1),
        (str(waiting), "chat-3", "c4", "Placed", 0, 1, 0),
    ]
    assert {s["generation"] for s in detail["shards"]} == {1}
    assert detail["autoscaling"]["average"] == 3.0 and detail["autoscaling"]["sampled"] == 4
    status, found = await hub.call("GET", f"/v1/services/{made['id']}/endpoints", token)
    assert status == 200
    assert [
        (e["shard"], e["cluster"], e["region"], e["clusterIP"], e["ready"], e["updated"])
        for e in found["items"]
    ] == [
        ("chat-0", "c1", "eu-c1", "10.96.0.10", 3, 3),
        ("chat-1", "c2", "eu-c2", "10.96.0.10", 1, 1),
    ]
    assert found["items"][0]["address"] == "chat.acme.svc.cluster.local"
    assert found["items"][0]["ports"] == [{"name": "http", "port": 8000, "protocol": "TCP"}]


async def test_a_report_of_an_earlier_placement_is_no_endpoint(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    made = await _create(hub, token, service_manifest())
    shard = await service_shard(hub, made["id"], 0, "c1", held=2, cap=2, serving=True)
    async with hub.db.transaction() as conn:  # requeued since: its report is of epoch 1
        await conn.execute(sa.update(jobs).where(jobs.c.id == shard).values(epoch=2))
    _, found = await hub.call("GET", "/v1/services/chat/endpoints", token)
    assert found["items"] == []
    _, detail = await hub.call("GET", "/v1/services/chat", token)
    assert detail["ready"] == 0 and detail["shards"][0]["held"] == 0


async def test_the_document_describes_services_and_links_the_created_one(hub: Hub) -> None:
    _, doc = await hub.call("GET", "/openapi.json", None)
    post = doc["paths"]["/v1/services"]["post"]
    assert {"201", "409", "422"} <= set(post["responses"])
    assert {"get_service", "update_service", "delete_service", "service_endpoints"} <= set(
        post["responses"]["201"]["links"]
    )
    assert post["responses"]["201"]["links"]["get_service"]["parameters"] == {
        "service": "$response.body#/name"
    }
    assert doc["paths"]["/v1/services/{service}"]["delete"]["responses"]["202"]
    schemas = doc["components"]["schemas"]
    assert "autoscaling" in schemas["ServiceSpec"]["properties"]
    assert "shards" in schemas["ServiceDetail"]["properties"]
