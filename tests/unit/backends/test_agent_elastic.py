"""The agent's side of elastic resizes: pods rendered for the replicas held, a placement that
may grow named and ganged from its first pod, removed replicas never reported."""

from __future__ import annotations

from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.backend import PodStatus
from cluster_agents.agent.render import render
from cluster_agents.agent.status import summarize
from federation.wire.agent import Assignment, assigned_tasks
from tests.compiled_jobs import assignment, compiled
from tests.unit.backends.k8s_objects import CATALOG, JOB
from tests.unit.backends.test_agent_gangs_and_reasons import Clock, Hub

ELASTIC = {
    "name": "worker",
    "minReplicas": 1,
    "maxReplicas": 4,
    "image": "i",
    "resources": {"accelerators": {"count": 8, "anyOf": [{"flavor": "huawei/*"}]}},
}
FLAVORS = {"worker": "huawei/Ascend910B3"}


def holding(count: int) -> Assignment:
    """The elastic job's assignment holding `count` replicas."""
    placed = assignment(CATALOG, [ELASTIC], FLAVORS, job=JOB, epoch=2)
    tasks = assigned_tasks(compiled(CATALOG, [ELASTIC]), FLAVORS, {"worker": count})
    return placed.model_copy(update={"tasks": tasks})


def test_a_growable_placement_has_a_service_and_gang_from_its_first_pod() -> None:
    (alone,) = render(holding(1), "suanpan", CATALOG)
    assert alone.service == f"sp-{JOB}-e2" and alone.hostname == "job-worker-0"
    assert alone.gang == f"{JOB}-e2" and alone.env["MASTER_ADDR"] != "localhost"
    grown = render(holding(3), "suanpan", CATALOG)
    assert grown[0].name == alone.name  # the pod it has is the one it keeps
    assert [(p.hostname, p.env["RANK"]) for p in grown] == [
        (f"job-worker-{r}", str(r)) for r in range(3)
    ]


def test_a_grown_replica_waiting_for_a_node_leaves_the_placement_running() -> None:
    pods = [
        PodStatus("a", JOB, 2, "worker", 0, "Running"),
        PodStatus("b", JOB, 2, "worker", 1, "Pending", reason="Unschedulable"),
    ]
    assert summarize(pods, 2, now=1e6, gang_timeout_s=1, fewest=1).state == "Running"
    assert summarize(pods, 2, now=1e6, gang_timeout_s=1).state == "Unschedulable"


async def test_the_replicas_a_shrink_removed_are_not_reported_as_failed() -> None:
    hub = Hub()
    agent = Agent(AgentConfig("c"), Clock(), CATALOG, hub)  # type: ignore[arg-type]
    agent.active[JOB] = holding(2)
    pods = [
        PodStatus("a", JOB, 2, "worker", 0, "Running"),
        PodStatus("b", JOB, 2, "worker", 1, "Running"),
        # SIGTERM ended it: Failed while its deletion finishes
        PodStatus("c", JOB, 2, "worker", 2, "Failed", reason="Error", exit_code=143, deleting=True),
    ]
    await agent._report(pods)
    ((update,),) = [r.updates for r in hub.reports]
    assert (update.state, update.running, update.failed) == ("Running", 2, 0)
    assert [r.replica for r in update.replicas] == [0, 1]
