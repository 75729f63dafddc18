"""The hub over HTTPS: agents verify it, TLS 1.2+ only, client certificates bind an agent to
its cluster, and a renewed certificate is served without a restart."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509

from api.app import create_app
from api.security import HubRunner
from api.tls import ServerTLS
from cluster_agents.agent.hub_client import HubApi, HubRejected, HubUnavailable
from deploy.fleet import free_port
from deploy.local.pki import ServingPKI, write_leaf, write_serving_pki
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.tls_client import client_context
from federation.wire.agent import Registration
from tests.integration.conftest import ADMIN_TOKEN


@dataclass
class TlsHub:
    """A hub serving HTTPS from a per-test PKI, accepting client certificates of its CA."""

    pki: ServingPKI
    dir: Path
    tls: ServerTLS
    port: int

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def agent_context(self, client: str | None = None) -> ssl.SSLContext:
        if client is None:
            return client_context(self.pki.ca_cert)
        cert, key = write_leaf(self.pki, self.dir / "clients", client, client=True)
        return client_context(self.pki.ca_cert, cert, key)

    async def agent_token(self, cluster: str) -> str:
        admin = HubApi(self.url, ADMIN_TOKEN, tls=self.agent_context())
        session = await admin.open()
        async with session.post(
            self.url + "/v1/tokens",
            json={"name": f"{cluster}-agent", "role": "agent", "cluster": cluster},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        ) as resp:
            assert resp.status == 201, await resp.text()
            token = str((await resp.json())["token"])
        await admin.close()
        return token


@pytest.fixture
async def tls_hub(db: Database, tmp_path: Path) -> AsyncIterator[TlsHub]:
    await ensure_admin_token(db, ADMIN_TOKEN)
    pki = write_serving_pki(tmp_path / "pki")
    cert, key = write_leaf(pki, tmp_path / "hub", "hub", client=False)
    tls = ServerTLS(cert, key, client_ca=pki.ca_cert)
    runner = HubRunner(create_app(db), access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls.context).start()
    yield TlsHub(pki, tmp_path, tls, port)
    await runner.cleanup()


async def _register(api: HubApi, cluster: str) -> str:
    try:
        return (await api.register(Registration(cluster=cluster))).cluster
    finally:
        await api.close()


async def test_agent_verifies_the_hub_and_registers(tls_hub: TlsHub) -> None:
    token = await tls_hub.agent_token("bj")
    assert await _register(HubApi(tls_hub.url, token, tls=tls_hub.agent_context()), "bj") == "bj"


async def test_plain_http_agent_is_refused(tls_hub: TlsHub) -> None:
    token = await tls_hub.agent_token("bj")
    plain = HubApi(f"http://127.0.0.1:{tls_hub.port}", token)
    with pytest.raises(HubUnavailable):
        await _register(plain, "bj")


async def test_agent_refuses_a_hub_its_ca_did_not_sign(tls_hub: TlsHub, tmp_path: Path) -> None:
    token = await tls_hub.agent_token("bj")
    other = write_serving_pki(tmp_path / "other")
    with pytest.raises(HubUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
        await _register(HubApi(tls_hub.url, token, tls=client_context(other.ca_cert)), "bj")


async def test_client_certificate_binds_the_agent_to_its_cluster(tls_hub: TlsHub) -> None:
    token_b = await tls_hub.agent_token("sh")
    as_a = HubApi(tls_hub.url, token_b, tls=tls_hub.agent_context(client="bj"))
    with pytest.raises(HubRejected) as refused:
        await _register(as_a, "sh")
    assert refused.value.status == 403
    assert "client certificate" in str(refused.value)  # the problem document's detail
    as_b = HubApi(tls_hub.url, token_b, tls=tls_hub.agent_context(client="sh"))
    assert await _register(as_b, "sh") == "sh"


async def _served_serial(port: int, context: ssl.SSLContext) -> int:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der).serial_number


async def test_renewed_certificate_is_served_without_restart(tls_hub: TlsHub) -> None:
    context = tls_hub.agent_context()
    before = await _served_serial(tls_hub.port, context)
    stop = asyncio.Event()
    watcher = asyncio.create_task(tls_hub.tls.watch(stop, every_s=0.1))
    write_leaf(tls_hub.pki, tls_hub.dir / "hub", "hub", client=False)
    try:
        for _ in range(100):
            if await _served_serial(tls_hub.port, context) != before:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the hub still serves the old certificate")
    finally:
        stop.set()
        await watcher


async def test_tls_1_1_handshake_is_refused(tls_hub: TlsHub) -> None:
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(tls_hub.pki.ca_cert)
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionResetError)):  # the hub aborts the handshake
        await _served_serial(tls_hub.port, old)
    assert await _served_serial(tls_hub.port, tls_hub.agent_context()) > 0  # 1.2+ still served
