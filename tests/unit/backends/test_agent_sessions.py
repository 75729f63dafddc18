"""The agent never exits on an error while working: a session that fails for any reason (the
cluster's API down when it starts, found by the chaos suite's long run) is retried."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.hub_client import HubApi, HubUnavailable
from federation.wire.agent import Registration
from tests.unit.backends.k8s_objects import CATALOG


class StoppedApiserver:
    """A backend whose cluster API refuses the first session's facts, as a stopped
    kube-apiserver does; the second attempt ends the test by stopping the agent."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.calls = 0

    def now(self) -> float:
        return 10.0

    async def facts(self) -> None:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 6443)")
        self.stop.set()
        raise HubUnavailable("stopping")


async def test_a_session_the_cluster_api_fails_is_retried_not_fatal() -> None:
    stop = asyncio.Event()
    backend = StoppedApiserver(stop)
    agent = Agent(AgentConfig("c"), backend, CATALOG, None)  # type: ignore[arg-type]
    await asyncio.wait_for(agent._sessions(stop), 10)
    assert backend.calls == 2


class CollidingHub(StoppedApiserver):
    """A backend whose sessions keep failing as a hub answers a request that collided with
    another in its database: 503 with `Retry-After`."""

    def __init__(self, stop: asyncio.Event, failures: int) -> None:
        super().__init__(stop)
        self.failures = failures

    async def facts(self) -> None:
        self.calls += 1
        if self.calls > self.failures:
            self.stop.set()
        raise HubUnavailable("POST /v1/agent/register: 503 collided", retry_after_s=0.01)


async def test_a_hub_that_says_when_to_retry_is_retried_then_without_growing_back_off() -> None:
    """Found by the failover suite: two agents registering at once collided in the hub's
    database, and the doubling back-off kept one away for 30 s after the hub had said 1 s."""
    stop = asyncio.Event()
    backend = CollidingHub(stop, failures=6)
    agent = Agent(AgentConfig("c"), backend, CATALOG, None)  # type: ignore[arg-type]
    await asyncio.wait_for(agent._sessions(stop), 2)  # doubling from 0.5 s: >= 7.8 s
    assert backend.calls == 7


@pytest.mark.parametrize(
    ("status", "header", "expected"),
    [
        (503, "1", 1.0),
        (429, "2", 2.0),
        (503, None, None),
        (502, "Wed, 21 Oct 2026 07:28:00 GMT", None),
    ],
)
async def test_the_hubs_retry_after_reaches_the_agent(
    status: int, header: str | None, expected: float | None
) -> None:
    async def refuse(request: web.Request) -> web.Response:
        headers = {"Retry-After": header} if header is not None else {}
        return web.json_response({"title": "busy"}, status=status, headers=headers)

    app = web.Application()
    app.router.add_post("/v1/agent/register", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    hub = HubApi(f"http://127.0.0.1:{port}", "token")
    try:
        with pytest.raises(HubUnavailable) as failed:
            await hub.register(Registration(cluster="c"))
        assert failed.value.retry_after_s == expected
    finally:
        await hub.close()
        await runner.cleanup()
