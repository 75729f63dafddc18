"""A real `suanpan-hub serve` logging at DEBUG: its logs are JSON lines carrying request ids,
and neither they nor its problem documents ever hold a bearer token or a job's env secret;
a clean stop writes every audit record still buffered."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import sqlalchemy as sa

from deploy.fleet import free_port
from federation.store.database import Database
from federation.store.tables import audit_log
from tests.integration.conftest import ADMIN_TOKEN, job_manifest

pytestmark = pytest.mark.integration

SECRET = "hunter2-env-secret-value"
WRONG_TOKEN = "sp_wrong_token_that_must_not_leak_0123456789"


class Served:
    """A hub process and a session to it."""

    def __init__(self, url: str, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.url = url
        self.proc = proc
        self.log = log

    async def call(
        self, method: str, path: str, token: str | None = ADMIN_TOKEN, **kwargs: Any
    ) -> tuple[int, str]:
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers.setdefault("Authorization", f"Bearer {token}")
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, self.url + path, headers=headers, **kwargs) as resp,
        ):
            return resp.status, await resp.text()


@pytest.fixture
async def served(db: Database, pg_url: str, tmp_path: Path) -> AsyncIterator[Served]:
    port = free_port()
    log = tmp_path / "hub.log"
    env = {
        **os.environ,
        "DATABASE_URL": pg_url,
        "SUANPAN_ADMIN_TOKEN": ADMIN_TOKEN,
        "SUANPAN_PORT": str(port),
        "SUANPAN_LOG_LEVEL": "DEBUG",
        # else pgserver warns on import, before the hub has configured its logs
        "XDG_RUNTIME_DIR": str(tmp_path),
    }
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "api.hub_cli", "serve", "--api-only", env=env, stderr=out
        )
    hub = Served(f"http://127.0.0.1:{port}", proc, log)
    for _ in range(300):
        assert proc.returncode is None, log.read_text()
        try:
            if (await hub.call("GET", "/readyz", None))[0] == 200:
                break
        except aiohttp.ClientError:
            await asyncio.sleep(0.1)
    yield hub
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


async def test_tokens_and_secrets_never_reach_logs_or_problems(
    served: Served, db: Database
) -> None:
    assert (await served.call("POST", "/v1/tenants", json={"name": "acme"}))[0] == 201
    assert (await served.call("POST", "/v1/tenants/acme/queues", json={"name": "default"}))[
        0
    ] == 201
    status, text = await served.call(
        "POST", "/v1/tokens", json={"name": "m", "role": "member", "tenant": "acme"}
    )
    member = json.loads(text)["token"]
    manifest = job_manifest()
    manifest["spec"]["tasks"][0]["env"] = {"API_KEY": SECRET}
    status, _ = await served.call("POST", "/v1/jobs", member, json=manifest)
    assert status == 201
    manifest["spec"]["tasks"][0]["env"] = {"API_KEY": SECRET, "BAD": 5}
    refusals = [
        await served.call("POST", "/v1/jobs", member, json=manifest),
        await served.call("GET", "/v1/jobs", WRONG_TOKEN),
        await served.call("GET", "/v1/jobs", None, headers={"Authorization": f"Basic {SECRET}"}),
        await served.call(
            "GET", "/v1/jobs", None, headers={"Authorization": f"Bearer {WRONG_TOKEN * 300}"}
        ),
    ]
    assert [status for status, _ in refusals] == [422, 401, 401, 400]
    ids = [f"last-{i}" for i in range(5)]
    for request_id in ids:  # audited, then stopped at once: the buffer is written on the way out
        await served.call("POST", "/v1/tenants", member, headers={"X-Request-Id": request_id})
    served.proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(served.proc.wait(), 30) == 0

    for _, body in refusals:
        for secret in (SECRET, WRONG_TOKEN[:20], member, ADMIN_TOKEN):
            assert secret not in body
    text = served.log.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert any(line.get("requestId") == ids[-1] for line in lines)
    for secret in (SECRET, WRONG_TOKEN[:20], member, ADMIN_TOKEN):
        assert secret not in text
    async with db.connection() as conn:
        stored = set(await conn.scalars(sa.select(audit_log.c.request_id)))
    assert set(ids) <= stored
