"""An in-process fleet for the demo, tests and benchmarks: the real hub app on a loopback port,
its scheduling loop, and simulated member clusters each driven by a real agent."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from api.app import create_app
from api.tls import ServerTLS
from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.backend import ClusterBackend
from cluster_agents.agent.hub_client import HubApi
from cluster_agents.backends.simulated import SimNodeSpec, SimulatedCluster
from deploy.local.pki import ServingPKI, write_leaf, write_serving_pki
from deploy.local.processes import free_ports
from deploy.local.profile import load_profile
from federation.catalog import Catalog, load_catalog
from federation.controllers.scheduler import SchedulerLoop
from federation.hubconfig import HubConfig
from federation.store import migrate
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres
from federation.tls_client import client_context

PROFILE_PATH = Path(__file__).resolve().parent / "local/profiles/mixed.yaml"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    return free_ports(1)[0]


@dataclass
class Fleet:
    """A hub, its scheduling loop, and simulated clusters each with an agent."""

    db: Database
    admin_token: str
    port: int = field(default_factory=free_port)
    catalog: Catalog = field(default_factory=load_catalog)
    time_scale: float = 20.0
    # gang timeout in the simulated clusters' clock (time_scale x faster than real time)
    config: HubConfig = field(
        default_factory=lambda: HubConfig(interval_s=0.2, gang_timeout_s=600, history_interval_s=1)
    )
    clusters: dict[str, ClusterBackend] = field(default_factory=dict)
    agents: dict[str, tuple[Agent, asyncio.Event, asyncio.Task[None]]] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    runner: web.AppRunner | None = None
    loop_stop: asyncio.Event = field(default_factory=asyncio.Event)
    loop_task: asyncio.Task[None] | None = None
    datadir: Path | None = None  # where its embedded database lives, if it has one
    poll_wait_s: float = 1.0  # agents' assignment long-poll (production: 10 s)
    keep_finished_s: float = 3600.0  # agents keep finished pods this long (for their logs)
    telemetry_interval_s: float = 1.0  # agents read their devices' telemetry (production: 10 s)
    pki: ServingPKI | None = None  # serve HTTPS from this run's CA; agents present client certs

    @property
    def url(self) -> str:
        """The hub's base URL."""
        return f"{'https' if self.pki else 'http'}://127.0.0.1:{self.port}"

    def client_tls(self, cluster: str | None = None) -> ssl.SSLContext | None:
        """What a client verifies the hub with (None: plain HTTP); with `cluster`, also a client
        certificate naming it."""
        if self.pki is None:
            return None
        if cluster is None:
            return client_context(self.pki.ca_cert)
        cert, key = write_leaf(self.pki, self.pki.ca_cert.parent / "agents", cluster, client=True)
        return client_context(self.pki.ca_cert, cert, key)

    async def start_hub(self) -> None:
        """Serve the hub API (over HTTPS with a `pki`)."""
        self.runner = web.AppRunner(
            create_app(self.db, catalog=self.catalog, config=self.config), access_log=None
        )
        await self.runner.setup()
        context = None
        if self.pki is not None:
            hub = self.pki.ca_cert.parent / "hub"
            cert, key = write_leaf(self.pki, hub, "hub", client=False)
            context = ServerTLS(cert, key, client_ca=self.pki.ca_cert).context
        await web.TCPSite(self.runner, "127.0.0.1", self.port, ssl_context=context).start()

    async def stop_hub(self) -> None:
        """Stop serving (as if the hub process died)."""
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    def start_loop(self) -> None:
        """Run the scheduling loop (leader election included)."""
        loop = SchedulerLoop(self.db, self.catalog, config=self.config)
        self.loop_stop = asyncio.Event()
        self.loop_task = asyncio.create_task(loop.run(self.loop_stop))

    async def stop_loop(self) -> None:
        """Stop the scheduling loop."""
        self.loop_stop.set()
        if self.loop_task is not None:
            await self.loop_task
            self.loop_task = None

    @contextlib.asynccontextmanager
    async def _request(
        self, method: str, path: str, token: str | None, **kw: Any
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A request to the hub API with `token` (the admin's by default), over its TLS."""
        headers = {"Authorization": f"Bearer {token or self.admin_token}"}
        tls = self.client_tls() or True
        async with (
            aiohttp.ClientSession(headers=headers, connector=aiohttp.TCPConnector(ssl=tls)) as s,
            s.request(method, self.url + path, **kw) as r,
        ):
            yield r

    async def call(self, method: str, path: str, token: str | None = None, **kw: Any) -> Any:
        """Call the hub API (admin token by default); returns the decoded body."""
        async with self._request(method, path, token, **kw) as r:
            return None if r.status == 204 else await r.json(content_type=None)

    async def text(self, path: str, token: str | None = None, **params: str) -> tuple[int, str]:
        """GET a text resource of the hub API (admin token by default): status and body."""
        async with self._request("GET", path, token, params=params) as r:
            return r.status, await r.text()

    async def add_cluster(
        self,
        name: str,
        profile_cluster: str,
        *,
        region: str = "",
        profile: Path = PROFILE_PATH,
        hub_url: str | None = None,
    ) -> SimulatedCluster:
        """Simulate `profile_cluster` of a node profile as cluster `name`, with its agent (its
        pods' loopback addresses a block of their own)."""
        entry = next(c for c in load_profile(profile).clusters if c.name == profile_cluster)
        nodes = [SimNodeSpec(n.name, n.labels, n.capacity, n.annotations) for n in entry.nodes]
        sim = SimulatedCluster(
            self.catalog, nodes, time_scale=self.time_scale, pod_block=len(self.clusters)
        )
        await self.attach(name, sim, region=region, hub_url=hub_url)
        return sim

    async def attach(
        self,
        name: str,
        backend: ClusterBackend,
        *,
        region: str = "",
        namespace: str = "suanpan",
        hub_url: str | None = None,
    ) -> None:
        """Register cluster `name` (an agent token) and run an agent over `backend` (talking to
        the hub at `hub_url`, default its own address)."""
        self.clusters[name] = backend
        issued = await self.call(
            "POST", "/v1/tokens", json={"name": f"{name}-agent", "role": "agent", "cluster": name}
        )
        self.tokens[name] = issued["token"]
        self.start_agent(name, region=region, namespace=namespace, hub_url=hub_url)

    def start_agent(
        self,
        name: str,
        *,
        region: str = "",
        namespace: str = "suanpan",
        hub_url: str | None = None,
    ) -> None:
        """Start (or restart) the agent of cluster `name`."""
        agent = Agent(
            AgentConfig(
                cluster=name,
                region=region,
                namespace=namespace,
                poll_wait_s=self.poll_wait_s,
                keep_finished_s=self.keep_finished_s,
                telemetry_interval_s=self.telemetry_interval_s,
            ),
            self.clusters[name],
            self.catalog,
            HubApi(hub_url or self.url, self.tokens[name], tls=self.client_tls(name)),
        )
        stop = asyncio.Event()
        self.agents[name] = (agent, stop, asyncio.create_task(agent.run(stop)))

    async def stop_agent(self, name: str) -> None:
        """Stop the agent of cluster `name` (its simulated cluster keeps running)."""
        _, stop, task = self.agents.pop(name)
        stop.set()
        await task

    async def close(self) -> None:
        """Stop agents, loop and hub."""
        for name in list(self.agents):
            await self.stop_agent(name)
        await self.stop_loop()
        await self.stop_hub()


@contextlib.asynccontextmanager
async def local_fleet(
    admin_token: str,
    *,
    scheduling: bool = True,
    config: HubConfig | None = None,
    tls: bool = True,
) -> AsyncIterator[Fleet]:
    """A fleet on a throw-away embedded PostgreSQL (migrated, with `admin_token`), hub serving
    (over HTTPS from a fresh CA unless `tls` is off) and (unless `scheduling` is off) its
    scheduling loop running; all removed on exit."""
    pki_dir = tempfile.TemporaryDirectory(prefix="suanpan-fleet-pki-")
    pg = EmbeddedPostgres()
    url = await pg.start()
    await migrate.upgrade(url)
    db = Database(url)
    await ensure_admin_token(db, admin_token)
    fleet = Fleet(db, admin_token, datadir=pg.datadir)
    if tls:
        fleet.pki = write_serving_pki(Path(pki_dir.name))
    if config is not None:
        fleet.config = config
    await fleet.start_hub()
    if scheduling:
        fleet.start_loop()
    try:
        yield fleet
    finally:
        await fleet.close()
        await db.close()
        await pg.stop()
        pki_dir.cleanup()
