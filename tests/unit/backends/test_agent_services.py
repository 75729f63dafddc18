"""The agent's side of a service's shard: its pods and Service as rendered, the rolling
update's steps (with hypothesis: no ready replica lost, at most one surge), the metric page
parsed, and the reconcile loop over the simulated cluster rolling a shard over."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cluster_agents.agent import rollout
from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.backend import PodStatus
from cluster_agents.agent.metric_reader import metric_total, pod_url
from cluster_agents.agent.render import pod_name, render
from cluster_agents.agent.serving import Reading, device_reading, serving_status, shard_service
from cluster_agents.agent.status import summarize
from cluster_agents.backends.k8s_render import owner_reference, render_pod, render_shard_service
from cluster_agents.backends.simulated import SimNodeSpec, SimulatedCluster
from federation.wire import annotations as ann
from federation.wire.telemetry import DeviceTelemetry
from tests.compiled_jobs import service_assignment
from tests.unit.backends.k8s_objects import CATALOG, JOB
from tests.unit.backends.test_agent_gangs_and_reasons import Hub

PROBE = {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 2}
SERVER: dict[str, Any] = {
    "replicas": 4,
    "resources": {"cpu": "1", "memory": "1Gi"},
    "template": {
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": "web:1",
                    "readinessProbe": PROBE,
                    "livenessProbe": {"tcpSocket": {"port": 8080}},
                }
            ]
        }
    },
}
SCALED = {"metric": {"name": "inflight", "target": 4, "port": 9090}}


def shard(held: int = 2, generation: int = 1, **spec: Any) -> Any:
    """The shard of service "web" (autoscaled between 1 and 4 with `autoscaling`, else of 4)."""
    server = SERVER
    if "autoscaling" in spec:
        server = {k: v for k, v in SERVER.items() if k != "replicas"}
        server |= {"minReplicas": 1, "maxReplicas": 4}
    return service_assignment(
        CATALOG, server, held=held, generation=generation, job=JOB, epoch=3, **spec
    )


# --- rendering -----------------------------------------------------------------------------


def test_service_pods_restart_in_place_with_probes_and_their_generation() -> None:
    pods = render(shard(generation=2), "suanpan", CATALOG)
    assert [p.name for p in pods] == [pod_name(JOB, 3, "server", r, generation=2) for r in (0, 1)]
    assert all(p.name.endswith("-g2") for p in pods)
    first = pods[0]
    assert first.labels[ann.GENERATION_LABEL] == "2" and first.restart_policy == "Always"
    assert not first.gated and not first.gang and not first.service  # no gang, no headless
    assert first.hostname == "web-0-server-0"
    assert "RANK" not in first.env and first.env["SUANPAN_REPLICA"] == "0"
    body = render_pod(first, owner_reference(JOB, 3, "uid"))
    assert body["spec"]["restartPolicy"] == "Always"
    (container,) = body["spec"]["containers"]
    assert container["readinessProbe"] == PROBE
    assert container["livenessProbe"] == {"tcpSocket": {"port": 8080}}
    assert "subdomain" not in body["spec"] and "schedulingGates" not in body["spec"]


def test_batch_pods_keep_their_names_and_restart_policy() -> None:
    assert pod_name(JOB, 1, "w", 0, attempt=2) == f"sp-{JOB[:8]}-e1-w-0-a2"
    assert pod_name(JOB, 1, "w", 0) == f"sp-{JOB[:8]}-e1-w-0"


def test_the_shards_service_selects_its_placement_on_the_service_ports() -> None:
    service = shard_service(shard(), shard().service, "suanpan")
    body = render_shard_service(service)
    assert body["metadata"]["name"] == "web" and body["metadata"]["namespace"] == "suanpan-t"
    assert body["spec"]["type"] == "ClusterIP"
    assert body["spec"]["selector"] == {ann.JOB_LABEL: JOB, ann.EPOCH_LABEL: "3"}
    assert body["spec"]["ports"] == [
        {"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}
    ]


# --- the rolling update --------------------------------------------------------------------


def pod(replica: int, generation: int, ready: bool = True, deleting: bool = False) -> PodStatus:
    return PodStatus(
        f"p{replica}g{generation}",
        JOB,
        3,
        "server",
        replica,
        "Running",
        ready=ready,
        generation=generation,
        deleting=deleting,
    )


def test_one_replica_at_a_time_its_old_pod_kept_until_the_new_one_is_ready() -> None:
    olds = [pod(0, 1), pod(1, 1)]
    assert rollout.plan(2, 2, olds) == rollout.Plan(frozenset({0}), frozenset({"p0g1", "p1g1"}))
    surging = [*olds, pod(0, 2, ready=False)]
    assert rollout.plan(2, 2, surging) == rollout.Plan(frozenset({0}), frozenset({"p0g1", "p1g1"}))
    replaced = [*olds, pod(0, 2)]
    assert rollout.plan(2, 2, replaced) == rollout.Plan(frozenset({0, 1}), frozenset({"p1g1"}))
    assert rollout.plan(2, 2, [pod(0, 2), pod(1, 2)]) == rollout.Plan(
        frozenset({0, 1}), frozenset()
    )


def test_a_replica_without_a_ready_pod_is_replaced_at_once() -> None:
    step = rollout.plan(2, 2, [pod(0, 1, ready=False), pod(1, 1, ready=False)])
    assert step == rollout.Plan(frozenset({0, 1}), frozenset())


Pods = st.lists(
    st.builds(
        pod,
        replica=st.integers(0, 3),
        generation=st.integers(1, 3),
        ready=st.booleans(),
        deleting=st.booleans(),
    ),
    max_size=10,
    unique_by=lambda p: p.name,
)


def ready_replicas(pods: list[PodStatus]) -> set[int]:
    return {p.replica for p in pods if p.ready and not p.deleting}


@given(Pods, st.integers(1, 3), st.integers(1, 4))
def test_no_ready_replica_is_lost_and_at_most_one_surges(
    pods: list[PodStatus], generation: int, replicas: int
) -> None:
    step = rollout.plan(generation, replicas, pods)
    live = [p for p in pods if not p.deleting and p.replica < replicas]
    current = {p.replica: p for p in live if p.generation == generation}
    after = [p for p in live if p.name in step.keep or p is current.get(p.replica)]
    after = [p for p in after if p.name in step.keep or p.replica in step.current]
    assert ready_replicas(after) >= ready_replicas(live)
    pods_per_replica = {
        r: sum(p.name in step.keep for p in live if p.replica == r) + (r in step.current)
        for r in range(replicas)
    }
    assert sum(n > 1 for n in pods_per_replica.values()) <= 1
    assert all(p.generation != generation for p in live if p.name in step.keep)


@given(st.integers(1, 4), st.integers(1, 4))
def test_a_rollout_ends_with_every_replica_on_the_new_generation(
    replicas: int, generation: int
) -> None:
    """Pods come up ready once created; the plan applied step by step converges."""
    pods = [pod(r, 0) for r in range(replicas)]
    for _ in range(3 * replicas + 2):
        step = rollout.plan(generation, replicas, pods)
        have = {p.replica for p in pods if p.generation == generation}
        pods = [p for p in pods if p.name in step.keep or p.generation == generation]
        pods += [pod(r, generation) for r in step.current - have]
        assert len(pods) <= replicas + 1 and len(ready_replicas(pods)) >= replicas
    assert sorted((p.replica, p.generation) for p in pods) == [
        (r, generation) for r in range(replicas)
    ]


# --- status --------------------------------------------------------------------------------


def test_a_shard_runs_once_a_replica_is_ready_and_never_succeeds() -> None:
    waiting = [pod(0, 1, ready=False), pod(1, 1, ready=False)]
    assert summarize(waiting, 2, now=0, gang_timeout_s=60, serving=True).state == "Applied"
    # its only ready pod is of the older generation, its replacement not ready yet
    rolling = [pod(0, 1), pod(0, 2, ready=False), pod(1, 2, ready=False)]
    assert summarize(rolling, 2, now=0, gang_timeout_s=60, serving=True).state == "Running"


def test_serving_counts_ready_and_updated_replicas_and_the_metric() -> None:
    assignment = shard(generation=2, autoscaling=SCALED)
    service = shard_service(assignment, assignment.service, "suanpan")
    pods = [pod(0, 1), pod(0, 2), pod(1, 1), pod(2, 2, ready=False)]
    status = serving_status(service, assignment.service, "10.96.0.9", pods, Reading(7.5, 2))
    assert status.address == "web.suanpan-t.svc.cluster.local"
    assert (status.cluster_ip, status.ready, status.updated, status.generation) == (
        "10.96.0.9",
        2,
        1,
        2,
    )
    assert (status.metric_sum, status.sampled) == (7.5, 2)
    assert [(p.name, p.port) for p in status.ports] == [("http", 8080)]
    unscaled = serving_status(service, shard().service, "", pods, None)
    assert (unscaled.metric_sum, unscaled.sampled) == (None, 0)


# --- the metric ----------------------------------------------------------------------------


def test_the_metric_is_the_sum_of_its_samples_over_every_label_set() -> None:
    page = (
        "# HELP inflight requests in flight\n# TYPE inflight gauge\n"
        'inflight{model="a"} 3\ninflight{model="b"} 4.5\nother 100\n'
        "# TYPE served counter\nserved_total 12\n"
    )
    assert metric_total(page, "inflight") == 7.5
    assert metric_total(page, "served_total") == 12
    assert metric_total(page, "missing") is None
    assert metric_total("inflight NaN\n", "inflight") is None
    assert metric_total("inflight{ 3\n", "inflight") is None


def test_pod_urls_bracket_v6_addresses() -> None:
    assert pod_url("127.64.0.1", 9090, "/metrics") == "http://127.64.0.1:9090/metrics"
    assert pod_url("fd00::7", 9090, "/m") == "http://[fd00::7]:9090/m"


# --- the agent over the simulated cluster ----------------------------------------------------


async def test_the_agent_rolls_a_shard_over_keeping_its_replicas_ready() -> None:
    node = SimNodeSpec("n", {}, {"cpu": "16", "memory": "64Gi", "pods": "110"})
    sim = SimulatedCluster(CATALOG, [node])
    hub = Hub()
    agent = Agent(AgentConfig("c"), sim, CATALOG, hub)  # type: ignore[arg-type]
    agent.caught_up = True
    agent.active[JOB] = shard(held=2, generation=1)
    await agent.reconcile()
    await agent.reconcile()
    assert sim.services[("suanpan-t", "web")].epoch == 3
    assert hub.reports[-1].updates[-1].serving is not None
    assert hub.reports[-1].updates[-1].serving.ready == 2
    assert all(p.pod_ip.startswith("127.") for p in sim.pods())
    agent.active[JOB] = shard(held=2, generation=2)
    seen = []
    for _ in range(8):
        await agent.reconcile()
        live = [p for p in sim.pods() if not p.deleting]
        seen.append(sorted((p.replica, p.generation) for p in live))
        assert len({p.replica for p in live if p.ready}) == 2 and len(live) <= 3
    assert seen[-1] == [(0, 2), (1, 2)]
    assert any(len(s) == 3 for s in seen)  # it surged
    serving = hub.reports[-1].updates[-1].serving
    assert serving is not None and (serving.ready, serving.updated) == (2, 2)
    del agent.active[JOB]
    agent.released[JOB] = 3
    await agent.reconcile()
    assert not sim.services and all(p.deleting for p in sim.pods())


def test_a_shard_scaling_by_device_utilization_reads_the_devices_its_ready_pods_hold() -> None:
    flavor = "nvidia/H100-80GB"
    latest = {
        r.key: r
        for r in (
            DeviceTelemetry(node="n1", flavor=flavor, index=0, utilization=90),
            DeviceTelemetry(node="n1", flavor=flavor, index=1, utilization=70),
            DeviceTelemetry(node="n2", flavor=flavor, index=0, utilization=None),
            DeviceTelemetry(node="n2", flavor="huawei/Ascend910B3", index=1, utilization=5),
        )
    }

    def pod(replica: int, node: str, devices: tuple[int, ...], ready: bool = True) -> PodStatus:
        return PodStatus(
            f"p{replica}", JOB, 1, "server", replica, "Running", node, devices=devices, ready=ready
        )

    pods = [
        pod(0, "n1", (0, 1)),  # mean of 90 and 70
        pod(1, "n2", (0, 1)),  # no reading of its flavor's devices: not sampled
        pod(2, "n1", (0,), ready=False),  # not ready: not counted
    ]
    assert device_reading(pods, flavor, latest) == Reading(80.0, 1)
    assert device_reading([], flavor, latest) == Reading(0.0, 0)
