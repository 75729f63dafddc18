"""The agent's side of gangs (gates lifted only when the gang exists) and of waiting reasons."""

from __future__ import annotations

from typing import Any

from cluster_agents.agent.agent import Agent, AgentConfig, gates_to_lift
from cluster_agents.agent.backend import PodStatus
from cluster_agents.agent.render import render
from cluster_agents.agent.status import summarize
from federation.wire.agent import StatusAck, StatusReport
from tests.compiled_jobs import assignment
from tests.unit.backends.k8s_objects import CATALOG, JOB

NO_FIT = "0/3 nodes are available: 3 Insufficient huawei.com/Ascend910B3."
WORKER = {
    "name": "worker",
    "replicas": 3,
    "image": "i",
    "resources": {"accelerators": {"count": 8, "anyOf": [{"flavor": "huawei/*"}]}},
}
GANG = assignment(
    CATALOG,
    [WORKER, {"name": "launcher", "image": "i"}],
    {"worker": "huawei/Ascend910B3", "launcher": None},
    job=JOB,
    epoch=2,
)


def status(name: str, *, node: str = "", gated: bool = True, **kw: Any) -> PodStatus:
    return PodStatus(name, JOB, 2, "worker", 0, "Pending", node=node, gated=gated, **kw)


def test_gates_lift_only_once_every_pod_of_the_gang_exists() -> None:
    wanted = {p.name: p for p in render(GANG, "suanpan", CATALOG)}
    workers = [n for n in wanted if "-worker-" in n]
    (launcher,) = [n for n in wanted if "-launcher-" in n]
    assert all(p.gated and p.gang == f"{JOB}-e2" for p in wanted.values())
    some = [status(n) for n in workers[:2]]
    assert gates_to_lift(wanted, some) == []  # a restarted agent creates the third first
    everyone = [status(n) for n in wanted]
    assert sorted(gates_to_lift(wanted, everyone)) == sorted(workers)  # the extender's members
    bound = [status(n, node="x", gated=False) for n in workers] + [status(launcher)]
    assert gates_to_lift(wanted, bound) == [launcher]  # CPU-only once the others are bound


def test_a_waiting_pod_reports_the_schedulers_message_then_unschedulable() -> None:
    pods = [status("a", gated=False, reason="Unschedulable", message=NO_FIT, created_at=0)]
    waiting = summarize(pods, 1, now=10, gang_timeout_s=120)
    assert (waiting.state, waiting.reason, waiting.message) == ("Applied", "Unschedulable", NO_FIT)
    late = summarize(pods, 1, now=200, gang_timeout_s=120)
    assert (late.state, late.reason) == ("Unschedulable", "Unschedulable")
    assert late.message == f"1/1 pods not running after 120 s: {NO_FIT}"
    gated = summarize([status("a", reason="SchedulingGated")], 1, now=10, gang_timeout_s=120)
    assert (gated.state, gated.reason) == ("Applied", "")


def test_a_scheduler_error_is_a_reason_to_wait_too() -> None:
    """Seen by hand: with the extender down, pods carry PodScheduled=False/SchedulerError and
    explain said nothing."""
    down = 'Post "http://127.0.0.1:8899/filter": dial tcp 127.0.0.1:8899: connect: refused'
    pods = [status("a", gated=False, reason="SchedulerError", message=down, created_at=0)]
    waiting = summarize(pods, 1, now=10, gang_timeout_s=120)
    assert (waiting.state, waiting.reason, waiting.message) == ("Applied", "SchedulerError", down)


class Hub:
    def __init__(self) -> None:
        self.reports: list[StatusReport] = []

    async def status(self, report: StatusReport) -> StatusAck:
        self.reports.append(report)
        return StatusAck(applied=len(report.updates), duplicate=0, stale=0)


class Clock:
    def now(self) -> float:
        return 10.0


async def test_the_agent_sends_again_when_the_reason_or_message_changes() -> None:
    hub = Hub()
    agent = Agent(AgentConfig("c"), Clock(), CATALOG, hub)  # type: ignore[arg-type]
    task = {**WORKER, "replicas": 1}
    one = assignment(CATALOG, [task], {"worker": "huawei/Ascend910B3"}, job=JOB, epoch=2)
    agent.active[JOB] = one
    pod = status("a", gated=False, reason="Unschedulable", message=NO_FIT)
    await agent._report([pod])
    await agent._report([pod])  # nothing new: nothing sent
    other = "0/4 nodes are available: 4 Insufficient huawei.com/Ascend910B3."
    await agent._report([status("a", gated=False, reason="Unschedulable", message=other)])
    sent = [(u.state, u.reason, u.message) for r in hub.reports for u in r.updates]
    assert sent == [("Applied", "Unschedulable", NO_FIT), ("Applied", "Unschedulable", other)]


class Pods:
    """A backend that records what the agent deletes, and with which grace period."""

    def __init__(self) -> None:
        self.deleted: list[tuple[list[str], int]] = []

    def now(self) -> float:
        return 10.0

    async def delete_pods(self, names: list[str], grace_seconds: int) -> None:
        self.deleted.append((sorted(names), grace_seconds))


async def test_pods_are_deleted_with_their_jobs_grace_period() -> None:
    backend = Pods()
    agent = Agent(AgentConfig("c", grace_seconds=30), backend, CATALOG, Hub())  # type: ignore[arg-type]
    task = {**WORKER, "replicas": 1}
    patient = assignment(CATALOG, [task], {"worker": "huawei/Ascend910B3"}, job=JOB, epoch=2)
    agent._take(patient.model_copy(update={"grace_period_seconds": 300, "state": "Released"}))
    other = "00000000-0000-0000-0000-000000000002"
    pods = [status("a"), status("b"), PodStatus("c", other, 1, "worker", 0, "Running")]
    await agent._delete(pods)
    assert backend.deleted == [(["c"], 30), (["a", "b"], 300)]
