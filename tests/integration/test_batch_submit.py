"""`POST /v1/job-batches`: each item accepted or refused on its own, idempotent per key, and
exactly the accepted ones stored."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.integration.conftest import Hub, job_manifest

pytestmark = pytest.mark.integration


def _item(name: str, key: str | None = None, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"manifest": job_manifest(name, **spec)}
    if key is not None:
        out["idempotencyKey"] = key
    return out


async def _stored(hub: Hub, user: str) -> list[str]:
    _, page = await hub.call("GET", "/v1/jobs", user, params={"limit": "500"})
    return sorted(j["name"] for j in page["items"])


async def test_each_item_stands_alone_and_only_accepted_ones_are_stored(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    bad = _item("nul")
    bad["manifest"]["spec"]["tasks"][0]["images"]["huawei"] = "bad\u0000image"
    items = [
        _item("a", "k-a"),
        bad,
        _item("b", "k-b"),
        _item("noqueue", queue="missing"),
        _item("unknown-flavor")
        | {
            "manifest": job_manifest("unknown-flavor")
            | {
                "spec": {
                    "queue": "default",
                    "tasks": [
                        {
                            "name": "w",
                            "image": "x",
                            "resources": {"accelerators": {"anyOf": [{"flavor": "acme/none"}]}},
                        }
                    ],
                }
            }
        },
        {"manifest": {"kind": "Job"}},
        _item("c"),
    ]
    status, result = await hub.call("POST", "/v1/job-batches", user, json={"items": items})
    assert status == 200
    statuses = [o["status"] for o in result["items"]]
    assert statuses == [201, 422, 201, 422, 422, 422, 201]
    nul = result["items"][1]["problem"]
    assert nul["errors"][0]["path"] == "spec.tasks[0].images.huawei"
    flavor = result["items"][4]["problem"]
    assert flavor["errors"][0]["path"] == "spec.tasks[0].resources.accelerators.anyOf[0].flavor"
    assert result["items"][3]["problem"]["errors"][0]["path"] == "spec.queue"
    assert await _stored(hub, user) == ["a", "b", "c"]


async def test_keys_make_items_idempotent_across_and_within_batches(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    first = [_item("a", "k-a"), _item("b", "k-b")]
    _, one = await hub.call("POST", "/v1/job-batches", user, json={"items": first})
    again = [_item("a", "k-a"), _item("changed", "k-b"), _item("d", "k-d"), _item("d", "k-d")]
    _, two = await hub.call("POST", "/v1/job-batches", user, json={"items": again})
    assert [o["status"] for o in two["items"]] == [200, 409, 201, 200]
    assert two["items"][0]["job"]["id"] == one["items"][0]["job"]["id"]
    assert two["items"][1]["problem"]["job"] == one["items"][1]["job"]["id"]
    assert two["items"][3]["job"]["id"] == two["items"][2]["job"]["id"]
    assert await _stored(hub, user) == ["a", "b", "d"]


async def test_concurrent_identical_batches_store_each_job_once(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    items = [_item(f"j{i}", f"key-{i}") for i in range(50)]
    replies = await asyncio.gather(
        *(hub.call("POST", "/v1/job-batches", user, json={"items": items}) for _ in range(5))
    )
    ids = {tuple(o["job"]["id"] for o in r["items"]) for _, r in replies}
    assert len(ids) == 1  # every batch answered with the same 50 jobs
    assert sum(o["status"] == 201 for _, r in replies for o in r["items"]) == 50
    assert await _stored(hub, user) == sorted(f"j{i}" for i in range(50))


async def test_a_batch_itself_must_be_well_formed(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    for body, path in (
        ({"items": []}, "items"),
        ({"items": [_item("a")] * 1001}, "items"),
        (
            {"items": [{"manifest": job_manifest("a"), "idempotencyKey": "bad key"}]},
            "items[0].idempotencyKey",
        ),
        (
            {"items": [{"manifest": job_manifest("a"), "idempotencyKey": "k\n"}]},
            "items[0].idempotencyKey",
        ),
        ({"items": [{"manifest": job_manifest("a"), "extra": 1}]}, "items[0].extra"),
    ):
        status, problem = await hub.call("POST", "/v1/job-batches", user, json=body)
        assert status == 422, body
        assert problem["errors"][0]["path"] == path
    assert await _stored(hub, user) == []
