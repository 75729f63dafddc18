"""The agent never exits on an error while working: a session that fails for any reason (the
cluster's API down when it starts, found by the chaos suite's long run) is retried."""

from __future__ import annotations

import asyncio

from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.hub_client import HubUnavailable
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
