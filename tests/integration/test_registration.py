"""Cluster registration with double opt-in, over the real hub and database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from api import cli
from api.app import create_app
from cluster_agents.agent import credential
from cluster_agents.agent.hub_client import HubApi
from deploy.netproxy import Proxy
from federation.catalog import load_catalog
from federation.controllers import health
from federation.controllers.snapshot import clusters_of_fleet
from federation.hubconfig import HubConfig, RegistrationConfig
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.wire.agent import Registration
from tests.integration.conftest import ADMIN_TOKEN, Hub, HubTestServer

pytestmark = pytest.mark.integration


@pytest.fixture
async def reg_hub(db: Database) -> AsyncIterator[Hub]:
    """A hub whose renewed credentials expire 1 s after renewal; `lab-*` is auto-accepted."""
    await ensure_admin_token(db, ADMIN_TOKEN)
    config = HubConfig(registration=RegistrationConfig(("lab-*",), 3600.0, 1.0))
    app = create_app(db, config=config)
    client: TestClient[Any, Any] = TestClient(HubTestServer(app, host="127.0.0.1"))
    await client.start_server()
    yield Hub(client, db)
    await client.close()


async def _bootstrap(hub: Hub, cluster: str, ttl: int = 600) -> str:
    status, body = await hub.call(
        "POST", f"/v1/clusters/{cluster}/bootstrap-tokens", json={"ttlSeconds": ttl}
    )
    assert status == 201, body
    return str(body["token"])


async def _credential(hub: Hub, cluster: str) -> str:
    token = await _bootstrap(hub, cluster)
    status, body = await hub.call(
        "POST", "/v1/agent/bootstrap", None, json={"cluster": cluster, "token": token}
    )
    assert status == 201, body
    return str(body["token"])


async def test_a_bootstrap_token_works_once(reg_hub: Hub) -> None:
    token = await _bootstrap(reg_hub, "x")
    redeem = {"cluster": "x", "token": token}
    status, body = await reg_hub.call("POST", "/v1/agent/bootstrap", None, json=redeem)
    assert status == 201 and body["token"].startswith("spc_") and body["expiresAt"]
    status, again = await reg_hub.call("POST", "/v1/agent/bootstrap", None, json=redeem)
    assert status == 401 and again["type"].endswith("unauthorized")
    status, _ = await reg_hub.call(
        "POST", "/v1/agent/register", body["token"], json={"cluster": "x"}
    )
    assert status == 200


async def test_an_expired_or_foreign_bootstrap_token_is_refused(reg_hub: Hub) -> None:
    token = await _bootstrap(reg_hub, "x", ttl=60)
    status, _ = await reg_hub.call(
        "POST", "/v1/agent/bootstrap", None, json={"cluster": "y", "token": token}
    )
    assert status == 401  # another cluster's token: refused, and not spent
    async with reg_hub.db.transaction() as conn:
        await conn.exec_driver_sql("UPDATE bootstrap_tokens SET expires_at = now()")
    status, body = await reg_hub.call(
        "POST", "/v1/agent/bootstrap", None, json={"cluster": "x", "token": token}
    )
    assert status == 401 and body["status"] == 401


async def _cluster(hub: Hub, name: str) -> dict[str, Any]:
    status, body = await hub.call("GET", f"/v1/clusters/{name}")
    assert status == 200
    return dict(body)


async def test_a_cluster_is_accepted_by_an_administrator_or_the_policy(reg_hub: Hub) -> None:
    credential = await _credential(reg_hub, "x")
    status, _ = await reg_hub.call("POST", "/v1/agent/register", credential, json={"cluster": "x"})
    assert status == 200
    assert not (await _cluster(reg_hub, "x"))["accepted"]
    status, body = await reg_hub.call("POST", "/v1/clusters/x/accept")
    assert status == 200 and body["accepted"]
    await _credential(reg_hub, "lab-1")
    assert (await _cluster(reg_hub, "lab-1"))["accepted"]
    status, _ = await reg_hub.call("POST", "/v1/clusters/nowhere/accept")
    assert status == 404


async def test_an_agent_credential_acts_only_for_its_own_cluster(reg_hub: Hub) -> None:
    a = await _credential(reg_hub, "a")
    await _credential(reg_hub, "b")
    status, body = await reg_hub.call("POST", "/v1/agent/register", a, json={"cluster": "b"})
    assert status == 403, body
    status, _ = await reg_hub.call("POST", "/v1/agent/register", a, json={"cluster": "a"})
    assert status == 200


async def test_renewal_gives_a_new_credential_and_retires_the_old(reg_hub: Hub) -> None:
    old = await _credential(reg_hub, "x")
    status, body = await reg_hub.call("POST", "/v1/agent/credential", old)
    assert status == 201 and body["token"] != old
    new = body["token"]
    assert (await reg_hub.call("POST", "/v1/agent/register", old, json={"cluster": "x"}))[0] == 200
    await asyncio.sleep(3.5)  # the 1 s grace, and the 2 s the hub caches a valid credential
    assert (await reg_hub.call("POST", "/v1/agent/register", old, json={"cluster": "x"}))[0] == 401
    assert (await reg_hub.call("POST", "/v1/agent/register", new, json={"cluster": "x"}))[0] == 200


async def test_a_revoked_cluster_is_cut_off_and_lost(reg_hub: Hub) -> None:
    credential = await _credential(reg_hub, "x")
    await reg_hub.call("POST", "/v1/clusters/x/accept")
    status, _ = await reg_hub.call("POST", "/v1/agent/register", credential, json={"cluster": "x"})
    assert status == 200 and (await _cluster(reg_hub, "x"))["state"] == "Ready"
    status, body = await reg_hub.call("POST", "/v1/clusters/x/revoke")
    assert status == 200 and body["state"] == "Offline" and not body["accepted"]
    status, problem = await reg_hub.call(
        "POST", "/v1/agent/lease", credential, json={"apiserverReachable": True}
    )
    assert status == 401, problem
    async with reg_hub.db.transaction() as conn:
        await health.check(conn, HubConfig().health)
    assert (await _cluster(reg_hub, "x"))["state"] == "Offline"


async def test_the_scheduler_sees_whether_a_cluster_is_accepted(reg_hub: Hub) -> None:
    await _credential(reg_hub, "x")
    await _credential(reg_hub, "lab-1")
    async with reg_hub.db.connection() as conn:
        fleet, _ = await clusters_of_fleet(conn, load_catalog())
    assert {c.name: c.accepted for c in fleet} == {"x": False, "lab-1": True}


async def test_the_agent_obtains_stores_and_renews_its_credential(
    reg_hub: Hub, tmp_path: Path
) -> None:
    token = await _bootstrap(reg_hub, "x")
    path = tmp_path / "credential.json"
    api = HubApi(str(reg_hub.client.make_url("/")), "")
    try:
        first = await credential.obtain(api, path, "x", token)
        assert credential.load(path) == first
        assert (await credential.obtain(api, path, "x", token)) == first  # kept: not spent again
        renewed = await api.renew_credential()
        assert renewed.token != first.token
        api.use_token(renewed.token)
        reply = await api.register(Registration(cluster="x"))
        assert reply.cluster == "x"
    finally:
        await api.close()


async def test_the_agent_waits_for_an_unreachable_hub_to_bootstrap(
    reg_hub: Hub, tmp_path: Path
) -> None:
    """The agent never exits because the hub cannot be reached: it retries the exchange."""
    token = await _bootstrap(reg_hub, "x")
    proxy = Proxy(reg_hub.client.port)
    await proxy.start()
    proxy.cut()
    api = HubApi(proxy.url, "")
    try:
        pending = asyncio.create_task(
            credential.obtain(api, tmp_path / "credential.json", "x", token)
        )
        await asyncio.sleep(2.0)
        assert not pending.done()  # still trying, not failed
        proxy.heal()
        got = await asyncio.wait_for(pending, 30)
        assert got.token.startswith("spc_")
    finally:
        await api.close()
        await proxy.close()


async def test_the_cluster_list_says_which_clusters_wait_for_acceptance(
    reg_hub: Hub, capsys: pytest.CaptureFixture[str]
) -> None:
    credential = await _credential(reg_hub, "x")
    await reg_hub.call("POST", "/v1/agent/register", credential, json={"cluster": "x"})
    args = ["--hub", str(reg_hub.client.make_url("")), "--token", ADMIN_TOKEN, "get", "clusters"]

    async def listed() -> str:
        assert await cli._run(cli.parser().parse_args(args)) == 0
        return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("x "))

    assert "(not accepted)" in await listed()
    await reg_hub.call("POST", "/v1/clusters/x/accept")
    assert "(not accepted)" not in await listed()
