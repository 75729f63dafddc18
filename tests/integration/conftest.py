"""Fixtures for API tests: the real hub application over the real database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web_runner import BaseRunner

from api.app import create_app
from api.security import HubRunner
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database

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


@pytest.fixture
async def hub(db: Database) -> AsyncIterator[Hub]:
    """The hub app on a loopback port with a bootstrap admin token."""
    await ensure_admin_token(db, ADMIN_TOKEN)
    client: TestClient[Any, Any] = TestClient(HubTestServer(create_app(db), host="127.0.0.1"))
    await client.start_server()
    yield Hub(client, db)
    await client.close()


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
