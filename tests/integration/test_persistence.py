"""The persistent embedded PostgreSQL and backup/restore, on real PostgreSQL servers.

A hub killed with SIGKILL takes its server down and a restart keeps every tenant, token and
job; a second hub on the same data is refused; a server left running on the data by some
other process is stopped by the next start; backups round-trip on the embedded server (also
while a hub serves from it) and on an external one (the session's server, into a fresh
database, every table compared).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest
import sqlalchemy as sa

from api.audit import AUDIT
from api.hub_cli import backup_to, restore_from
from deploy.fleet import free_port
from federation.settings import HubSettings
from federation.store.database import Database
from federation.store.embedded import PG_BIN, EmbeddedPostgres, InUse, running_server
from federation.store.tables import metadata
from tests.integration.conftest import ADMIN_TOKEN, Hub, job_manifest

pytestmark = pytest.mark.integration


HUB_CLI = (sys.executable, "-m", "api.hub_cli")


class HubProcess:
    """`suanpan-hub serve` without DATABASE_URL, as a child process on a data directory."""

    def __init__(self, data_dir: Path, log: Path) -> None:
        self.data_dir = data_dir
        self.url = f"http://127.0.0.1:{free_port()}"
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env["SUANPAN_ADMIN_TOKEN"] = ADMIN_TOKEN
        self._log = log.open("a")
        self.proc = subprocess.Popen(
            [*HUB_CLI, "serve", f"--data-dir={data_dir}", f"--port={self.url.rsplit(':', 1)[1]}"],
            env=env,
            stdout=self._log,
            stderr=self._log,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, log.read_text()
            try:
                urllib.request.urlopen(self.url + "/readyz", timeout=1)
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(log.read_text())

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str = ADMIN_TOKEN,
        headers: dict[str, str] | None = None,
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data, headers or {}, method=method)
        req.add_header("Authorization", f"Bearer {token}")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def server_pid(self) -> int:
        info = running_server(self.data_dir / "postgres")
        assert info is not None
        return int(info.pid)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        self._log.close()


@pytest.fixture
def hubs(tmp_path: Path) -> Iterator[list[HubProcess]]:
    """Started hub processes, killed at the end if a test left any running."""
    started: list[HubProcess] = []
    yield started
    for hub in started:
        if hub.proc.poll() is None:
            hub.stop(signal.SIGKILL)


def _hub_cli(command: str, file: Path, data_dir: Path) -> None:
    """`suanpan-hub backup|restore FILE --data-dir DIR` on the embedded server (also when the
    suite runs against an external one: DATABASE_URL would win), which must succeed."""
    args = [*HUB_CLI, command, str(file), f"--data-dir={data_dir}"]
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run(args, capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr


def _gone(pid: int, within_s: float = 15.0) -> bool:
    """The process exits within `within_s` (a zombie nobody reaped yet counts as gone)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_killed_hub_leaves_no_server_and_a_restart_keeps_everything(
    tmp_path: Path, hubs: list[HubProcess]
) -> None:
    data = tmp_path / "data"
    log = tmp_path / "hub.log"
    hubs.append(first := HubProcess(data, log))
    first.call("POST", "/v1/tenants", {"name": "acme"})
    first.call("POST", "/v1/tenants/acme/queues", {"name": "default", "quota": {}})
    member = first.call(
        "POST", "/v1/tokens", {"name": "acme-ci", "role": "member", "tenant": "acme"}
    )["token"]
    job = first.call("POST", "/v1/jobs", job_manifest("kept"), token=member)
    backup = tmp_path / "live.dump"
    _hub_cli("backup", backup, data)  # taken from the serving hub's own server
    server = first.server_pid()
    first.stop(signal.SIGKILL)
    assert _gone(server), "the killed hub's PostgreSQL is still running"

    hubs.append(second := HubProcess(data, log))
    assert second.server_pid() != server
    again = second.call("GET", f"/v1/jobs/{job['id']}", token=member)
    assert (again["name"], again["tenant"], again["state"]) == ("kept", "acme", "Queued")
    second.stop()
    assert not (data / "postgres" / "postmaster.pid").exists()

    fresh = tmp_path / "restored"
    _hub_cli("restore", backup, fresh)
    hubs.append(third := HubProcess(fresh, log))
    assert third.call("GET", f"/v1/jobs/{job['id']}", token=member)["name"] == "kept"
    third.stop()


def test_one_hub_per_data_dir_and_a_stale_server_is_stopped(tmp_path: Path) -> None:
    datadir = tmp_path / "postgres"
    first = EmbeddedPostgres(datadir)
    asyncio.run(first.start())
    with pytest.raises(InUse):
        asyncio.run(EmbeddedPostgres(datadir).start())
    asyncio.run(first.stop())
    # A server on the data that no hub owns (as pg_ctl, or a hub killed mid-start, leaves one).
    pg_ctl = [str(PG_BIN / "pg_ctl"), "-D", str(datadir), "-o", f'-h "" -k {datadir}', "-w"]
    user = "pgserver" if os.geteuid() == 0 else None
    subprocess.run([*pg_ctl, "-l", str(datadir / "stale.log"), "start"], user=user, check=True)
    stale = running_server(datadir)
    assert stale is not None
    second = EmbeddedPostgres(datadir)
    try:
        url = asyncio.run(second.start())
        assert _gone(stale.pid, 5)
        assert asyncio.run(_rows(url))["alembic_version"] == []  # a working, unmigrated server
    finally:
        asyncio.run(second.stop())


async def _rows(url: str) -> dict[str, list[str]]:
    """Every row of every table (and the schema version), as sorted JSON text."""
    db = Database(url)
    out: dict[str, list[str]] = {}
    async with db.connection() as conn:
        exists = await conn.exec_driver_sql("SELECT to_regclass('alembic_version') IS NOT NULL")
        if not exists.scalar():
            return {"alembic_version": []}
        for name in [*(t.name for t in metadata.sorted_tables), "alembic_version"]:
            rows = await conn.execute(sa.text(f"SELECT to_jsonb(t)::text FROM {name} t"))
            out[name] = sorted(r[0] for r in rows)
    await db.close()
    return out


async def test_backup_restores_equal_data_into_a_fresh_external_database(
    hub: Hub, pg_url: str, tmp_path: Path
) -> None:
    token = await hub.tenant_with_queue("acme")
    for i in range(3):
        assert (await hub.call("POST", "/v1/jobs", token, json=job_manifest(f"j{i}")))[0] == 201
    await hub.client.app[AUDIT].flush()  # else audit records may land after the dump
    dump = tmp_path / "hub.dump"
    source = HubSettings(database_url=pg_url, admin_token=None)
    await backup_to(source, dump, PG_BIN)
    fresh = "restore_round_trip"
    admin = Database(pg_url)
    async with admin.connection() as conn:
        await conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {fresh}")
        await conn.exec_driver_sql(f"CREATE DATABASE {fresh}")
    target = sa.make_url(pg_url).set(database=fresh).render_as_string(hide_password=False)
    try:
        await restore_from(HubSettings(database_url=target, admin_token=None), dump, PG_BIN)
        before, after = await _rows(pg_url), await _rows(target)
        assert len(before["jobs"]) == 3 and before == after
    finally:
        async with admin.connection() as conn:
            await conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {fresh} WITH (FORCE)")
        await admin.close()


async def test_no_acknowledged_submission_is_lost_or_duplicated_across_a_kill_under_load(
    tmp_path: Path, hubs: list[HubProcess]
) -> None:
    """16 clients submit with idempotency keys while the hub is killed (-9) mid-stream; after a
    restart every acknowledged job is there once, and retrying every key, acknowledged or not,
    adds no second job (a key acknowledged before the kill answers its first job)."""
    data, log = tmp_path / "data", tmp_path / "hub.log"
    hubs.append(first := HubProcess(data, log))
    first.call("POST", "/v1/tenants", {"name": "acme"})
    first.call("POST", "/v1/tenants/acme/queues", {"name": "default", "quota": {}})
    token = first.call("POST", "/v1/tokens", {"name": "ci", "role": "member", "tenant": "acme"})[
        "token"
    ]
    acked: dict[str, str] = {}  # idempotency key -> job id, for every 2xx
    tried: list[str] = []
    enough, killed = asyncio.Event(), asyncio.Event()

    async def client(session: aiohttp.ClientSession, url: str, c: int) -> None:
        n = 0
        while not killed.is_set():
            key = f"c{c}-{n}"
            n += 1
            tried.append(key)
            try:
                async with session.post(
                    url + "/v1/jobs", json=job_manifest(key), headers={"Idempotency-Key": key}
                ) as resp:
                    if resp.status in (200, 201):
                        acked[key] = (await resp.json())["id"]
                        if len(acked) >= 100:
                            enough.set()
            except aiohttp.ClientError:
                return  # the hub is gone: this key's fate is unknown to its client

    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        clients = [asyncio.create_task(client(session, first.url, c)) for c in range(16)]
        await enough.wait()
        first.stop(signal.SIGKILL)  # requests in flight, a group possibly mid-commit
        killed.set()
        await asyncio.gather(*clients)
    hubs.append(second := HubProcess(data, log))
    by_name = {j["name"]: j["id"] for j in _all_jobs(second, token)}
    assert len(by_name) == len(_all_jobs(second, token)), "a submission was written twice"
    assert all(by_name.get(key) == job for key, job in acked.items()), "an acknowledged job lost"
    for key in tried:  # every client retries what it sent: no key makes a second job
        again = second.call(
            "POST", "/v1/jobs", job_manifest(key), token=token, headers={"Idempotency-Key": key}
        )
        assert again["id"] == by_name.get(key, again["id"])
    assert sorted(j["name"] for j in _all_jobs(second, token)) == sorted(tried)
    second.stop()


def _all_jobs(hub: HubProcess, token: str) -> list[dict[str, Any]]:
    """Every job the token sees, page by page."""
    found: list[dict[str, Any]] = []
    cursor = ""
    while True:
        page = hub.call("GET", f"/v1/jobs?limit=500{cursor}", token=token)
        found += page["items"]
        if not page["nextCursor"]:
            return found
        cursor = f"&cursor={page['nextCursor']}"
