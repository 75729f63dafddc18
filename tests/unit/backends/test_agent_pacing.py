"""Under steady churn the agent takes changes together instead of reconciling back to back:
a reconcile of d seconds is followed by at least d x (1 / reconcile_share - 1) of rest."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.cli import parser as agent_parser
from cluster_agents.backends.simulated import SimNodeSpec, SimulatedCluster
from tests.unit.backends.k8s_objects import CATALOG


async def _reconciles(share: float, seconds: float) -> int:
    """Reconciles done in `seconds` when each takes 0.2 s and the cluster always changes."""
    sim = SimulatedCluster(CATALOG, [SimNodeSpec("cpu-0", {}, {"cpu": "4", "memory": "8Gi"})])
    agent = Agent(AgentConfig("c", reconcile_share=share), sim, CATALOG, None)  # type: ignore[arg-type]
    calls = 0

    async def reconcile() -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.2)
        sim.changed.set()  # pods keep changing: there is always a next change

    async def nothing() -> None:
        return None

    agent.reconcile = reconcile  # type: ignore[method-assign]
    agent._send_delta = nothing  # type: ignore[method-assign]
    stop = asyncio.Event()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(agent._cluster_loop(stop), seconds)
    return calls


async def test_a_slow_reconcile_under_churn_is_followed_by_rest() -> None:
    paced, unpaced = await asyncio.gather(_reconciles(0.25, 2.0), _reconciles(1.0, 2.0))
    assert paced <= 3  # 0.2 s of work, then 0.6 s of rest
    assert unpaced >= 4  # 0.2 s of work, then the 0.1 s debounce only


def test_the_reconcile_share_is_a_fraction_of_the_agents_time() -> None:
    """`--reconcile-share` takes (0, 1]; anything else is refused, never coerced."""
    args = agent_parser().parse_args(["--hub=http://h", "--cluster=c", "--reconcile-share=0.5"])
    assert args.reconcile_share == 0.5
    for bad in ("0", "-0.1", "1.5", "half"):
        with pytest.raises(SystemExit):
            agent_parser().parse_args(["--hub=http://h", "--cluster=c", f"--reconcile-share={bad}"])
