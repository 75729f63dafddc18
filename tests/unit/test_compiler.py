"""The compiled job: one form from submission to pod, and the defects it closes.

The property test renders, for every manifest the schema accepts, the pod of each option and
checks that the hub's request, the pod's resources and annotations, and the extender's parse
of that pod are the same numbers.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cluster_agents.agent.render import render
from cluster_agents.backends.k8s_render import owner_reference, render_pod
from cluster_agents.kube.pods import pod_demand
from federation.catalog import load_catalog
from federation.compiled import CompiledJob, JobFacts, core_job, quota_charge
from federation.compiler import CompileError, compile_service, cpu_milli, memory_mib
from federation.scheduling.devices import WHOLE, DeviceRequest
from federation.scheduling.model import COMPUTE, CPU, MEMORY
from federation.spec import JobManifest, ServiceManifest
from tests.compiled_jobs import assignment, compiled, manifest

CATALOG = load_catalog()
ASCEND = "huawei/Ascend910B3"
H100 = "nvidia/H100-80GB"


def _pod_json(task: dict[str, Any], flavor: str | None) -> dict[str, Any]:
    """The first pod rendered for `task` on `flavor`, as kube-scheduler sends it."""
    spec = render(assignment(CATALOG, [task], {task["name"]: flavor}), "ns", CATALOG)[0]
    return render_pod(spec, owner_reference("j", 1, "u"))


def _share_task(fraction: float, flavor: str = H100, **accel: Any) -> dict[str, Any]:
    return {
        "name": "w",
        "image": "x",
        "resources": {
            "accelerators": {"fraction": fraction, "anyOf": [{"flavor": flavor}], **accel}
        },
    }


def test_a_tiny_share_is_one_vendor_unit_at_the_hub_and_in_the_pod() -> None:
    """Regression: 0.0004 was 1 milli-device at the hub and 0 % in the pod (never bound)."""
    option = compiled(CATALOG, [_share_task(0.0004)]).tasks[0].options[0]
    assert option.milli == 10  # 1 % of the device, HAMi's smallest gpucores
    pod = _pod_json(_share_task(0.0004), H100)
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpucores"] == "1"
    demand = pod_demand(CATALOG, pod)
    assert demand is not None and demand.request == DeviceRequest(1, 10, 0)


def test_moore_threads_shares_round_up_to_core_groups() -> None:
    option = compiled(CATALOG, [_share_task(0.1, "mthreads/*")]).tasks[0].options[0]
    assert option.resources["mthreads.com/sgpu-core"] == "2"  # 0.1 x 16 groups -> 2 groups
    assert option.milli == 125  # 2/16 of the device, rounded up to a milli


def test_a_share_that_rounds_to_the_whole_device_asks_for_the_whole_device() -> None:
    option = compiled(CATALOG, [_share_task(0.999)]).tasks[0].options[0]
    assert option.milli == WHOLE and option.resources == {"nvidia.com/gpu": "1"}


def test_cpu_and_memory_have_one_rounding_rule_at_hub_and_in_the_pod() -> None:
    """Regression: CPU and memory were rounded up at the hub and truncated in the cluster."""
    task = {
        "name": "w",
        "image": "x",
        "resources": {
            "cpu": "1.0001",
            "memory": "1000000000",
            "accelerators": {"anyOf": [{"flavor": ASCEND}]},
        },
    }
    form = compiled(CATALOG, [task]).tasks[0]
    assert (form.cpu_milli, form.memory_mib) == (1001, 954)
    pod = _pod_json(task, ASCEND)
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    assert (requests["cpu"], requests["memory"]) == ("1001m", "954Mi")
    demand = pod_demand(CATALOG, pod)
    assert demand is not None and (demand.cpu_milli, demand.memory_mib) == (1001, 954)


def test_quota_charge_counts_per_flavor_counts_and_compute_units() -> None:
    """Regression: the API's queue usage ignored per-flavor counts and compute units."""
    task = {
        "name": "w",
        "image": "x",
        "replicas": 2,
        "resources": {
            "cpu": "2",
            "memory": "1Gi",
            "accelerators": {
                "count": 8,
                "anyOf": [{"flavor": ASCEND, "count": 4}, {"flavor": H100}],
            },
        },
    }
    form = compiled(CATALOG, [task])
    charge = quota_charge(form, {"w": ASCEND})
    speed = CATALOG.get(ASCEND).speed  # type: ignore[union-attr]
    assert charge[ASCEND] == 2 * 4 * 1000
    assert charge[COMPUTE] == round(2 * 4 * 1000 * speed)
    assert (charge[CPU], charge[MEMORY]) == (4000, 2048)
    assert quota_charge(form, {"w": H100})[H100] == 2 * 8 * 1000


@pytest.mark.parametrize(
    ("task", "path"),
    [
        (_share_task(0.5, "biren/*"), "spec.tasks[0].resources.accelerators.anyOf[0].flavor"),
        (_share_task(0.5, "nope/*"), "spec.tasks[0].resources.accelerators.anyOf[0].flavor"),
        (
            {
                "name": "w",
                "images": {"nvidia": "cuda"},
                "resources": {"accelerators": {"anyOf": [{"flavor": ASCEND}]}},
            },
            "spec.tasks[0].resources.accelerators.anyOf[0].image",
        ),
        (
            _share_task(0.5, H100)
            | {
                "resources": {
                    "accelerators": {"fraction": 0.5, "anyOf": [{"flavor": H100, "count": 2}]}
                }
            },
            "spec.tasks[0].resources.accelerators.anyOf[0].count",
        ),
    ],
)
def test_what_the_catalog_cannot_serve_is_refused_with_its_path(
    task: dict[str, Any], path: str
) -> None:
    with pytest.raises(CompileError) as err:
        compiled(CATALOG, [task])
    assert err.value.path == path


# --- the property: hub, pod and extender agree for every manifest the schema accepts --------

_PATTERNS = [*sorted({m.key for m in CATALOG.models.values()}), "nvidia/*", "huawei/*", "metax/*"]
_CPU = st.one_of(
    st.integers(1, 64).map(str),
    st.integers(1, 64_000).map(lambda m: f"{m}m"),
    st.decimals("0.001", "64", places=4).map(str),
)
_MEMORY = st.one_of(
    st.integers(1, 512).map(lambda g: f"{g}Gi"),
    st.integers(1, 100_000).map(lambda m: f"{m}Mi"),
    st.integers(2**20, 2**36).map(str),
    st.integers(2, 60).map(lambda g: f"{g}G"),
)


@st.composite
def _accelerators(draw: st.DrawFn) -> dict[str, Any]:
    flavors = draw(st.lists(st.sampled_from(_PATTERNS), min_size=1, max_size=3))
    accel: dict[str, Any] = {"anyOf": [{"flavor": f} for f in flavors]}
    if draw(st.booleans()):
        accel["fraction"] = draw(st.floats(0.0001, 0.9999, allow_nan=False))
    else:
        accel["count"] = draw(st.sampled_from([1, 2, 4, 8]))
        for choice in accel["anyOf"]:
            if draw(st.booleans()):
                choice["count"] = draw(st.sampled_from([1, 2, 4]))
    if draw(st.booleans()):
        accel["minMemory"] = draw(st.sampled_from(["1Gi", "1500Mi", "10G", "24Gi"]))
    return accel


@st.composite
def _tasks(draw: st.DrawFn) -> dict[str, Any]:
    resources: dict[str, Any] = {"cpu": draw(_CPU), "memory": draw(_MEMORY)}
    if draw(st.booleans()):
        resources["accelerators"] = draw(_accelerators())
    return {
        "name": "w",
        "image": "img",
        "replicas": draw(st.integers(1, 4)),
        "resources": resources,
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tasks())
def test_hub_pod_and_extender_agree_on_every_accepted_manifest(task: dict[str, Any]) -> None:
    try:
        form = compiled(CATALOG, [task]).tasks[0]
    except CompileError:
        return  # refused at submission with a path: nothing is placed
    assert form.cpu_milli == cpu_milli(task["resources"]["cpu"])
    assert form.memory_mib == memory_mib(task["resources"]["memory"])
    for option in form.options or (None,):
        pod = _pod_json(task, option.flavor if option else None)
        container = pod["spec"]["containers"][0]["resources"]
        assert container["requests"] == container["limits"]
        demand = pod_demand(CATALOG, pod)
        if option is None:
            assert demand is None
            continue
        assert demand is not None
        assert demand.request == option.request  # hub == extender, device by device
        assert (demand.cpu_milli, demand.memory_mib) == (form.cpu_milli, form.memory_mib)
        extended = {k: v for k, v in container["requests"].items() if k not in ("cpu", "memory")}
        assert extended == option.resources
        assert pod["metadata"]["annotations"]["suanpan.io/flavor"] == option.flavor


def test_the_failure_policy_is_compiled_with_its_defaults_and_survives_storage() -> None:
    """Jobs stored before the policy existed read back with the defaults (3 retries, requeue)."""
    plain = compiled(CATALOG, [{"name": "w", "image": "i"}])
    assert plain.failure_policy.model_dump(by_alias=True) == {
        "backoffLimit": 3,
        "onNodeFailure": "requeue",
        "onClusterFailure": "requeue",
    }
    given = {"backoffLimit": 0, "onNodeFailure": "fail", "onClusterFailure": "fail"}
    strict = compiled(CATALOG, [{"name": "w", "image": "i"}], failurePolicy=given)
    stored = strict.model_dump(mode="json", by_alias=True)
    assert stored["failurePolicy"] == given
    assert CompiledJob.model_validate(stored) == strict
    del stored["failurePolicy"]
    assert CompiledJob.model_validate(stored).failure_policy == plain.failure_policy


def test_run_time_and_checkpoint_reach_the_core_job() -> None:
    task = {"name": "w", "image": "x", "resources": {"accelerators": {"anyOf": [{"flavor": H100}]}}}
    form = compiled(
        CATALOG,
        [task],
        maxRuntimeSeconds=3600,
        checkpoint={"intervalSeconds": 600, "gracePeriodSeconds": 90},
    )
    assert (form.checkpoint_interval_seconds, form.grace_period_seconds) == (600, 90)
    facts = JobFacts("j", "t/q", 0, True, 0.0, runtime_s=700, since_checkpoint_s=30)
    job = core_job(form, facts)
    assert (job.max_runtime_s, job.checkpoint_interval_s, job.since_checkpoint_s) == (
        3600,
        600,
        30,
    )
    assert job.lost_s == 30
    bare = core_job(compiled(CATALOG, [task]), facts)
    assert bare.max_runtime_s is None and bare.checkpoint_interval_s is None


def test_an_elastic_task_starts_at_its_minimum_and_reaches_the_core_with_its_bounds() -> None:
    task = {"name": "w", "image": "x", "minReplicas": 2, "maxReplicas": 6}
    form = compiled(CATALOG, [task])
    assert (form.tasks[0].replicas, form.tasks[0].max_replicas) == (2, 6)
    assert CompiledJob.model_validate(form.model_dump(mode="json", by_alias=True)) == form
    (core,) = core_job(form, JobFacts("j", "t/q", 0, True, 0.0)).tasks
    assert (core.replicas, core.floor, core.ceiling) == (2, 2, 6)
    (fixed,) = compiled(CATALOG, [{"name": "w", "image": "x", "replicas": 3}]).core_tasks()
    assert fixed.elastic is None and (fixed.floor, fixed.ceiling) == (3, 3)


def test_a_fixed_task_is_sent_as_before_elastic_jobs() -> None:
    """Agents forbid unknown fields: one not yet upgraded must still read a fixed job."""
    form = compiled(CATALOG, [{"name": "w", "image": "x", "replicas": 3}])
    sent = form.model_dump(mode="json", by_alias=True)["tasks"][0]
    assert not {"minReplicas", "maxReplicas"} & set(sent)
    assert CompiledJob.model_validate(form.model_dump(mode="json", by_alias=True)) == form


@pytest.mark.parametrize(
    ("task", "spec", "says"),
    [
        ({"minReplicas": 2}, {}, "both minReplicas and maxReplicas"),
        ({"maxReplicas": 2}, {}, "both minReplicas and maxReplicas"),
        ({"minReplicas": 3, "maxReplicas": 2}, {}, "must not exceed maxReplicas"),
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 4}, {}, "not both"),
        ({"minReplicas": 1, "maxReplicas": 1025}, {}, "less than or equal to 1024"),
        ({"minReplicas": 0, "maxReplicas": 2}, {}, "greater than or equal to 1"),
        ({"minReplicas": 1, "maxReplicas": 2}, {"gang": False}, "remove `gang: false`"),
    ],
)
def test_bad_elastic_bounds_are_refused(
    task: dict[str, Any], spec: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(says)):
        JobManifest.model_validate(manifest([{"name": "w", "image": "x", **task}], **spec))


def _service(metric: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Service",
        "metadata": {"name": "chat"},
        "spec": {
            "queue": "serve",
            "ports": [{"name": "http", "port": 8000}],
            "autoscaling": {"metric": metric},
            "server": {
                "image": "serve:1",
                "minReplicas": 1,
                "maxReplicas": 4,
                "resources": {"accelerators": {"anyOf": [{"flavor": "nvidia/H100*"}]}},
            },
        },
    }


def test_a_service_scaling_by_its_devices_compiles_the_source_and_a_pods_one_leaves_it_out() -> (
    None
):
    devices = compile_service(
        CATALOG, ServiceManifest.model_validate(_service({"source": "devices", "target": 70}))
    )
    assert devices.service is not None and devices.service.autoscaling is not None
    scaling = devices.service.autoscaling
    assert (scaling.source, scaling.metric, scaling.port, scaling.target) == (
        "devices",
        "device_utilization",
        0,
        70,
    )
    pods = compile_service(
        CATALOG,
        ServiceManifest.model_validate(_service({"name": "inflight", "target": 4, "port": 9})),
    )
    dumped = pods.model_dump(mode="json", by_alias=True)
    assert "source" not in dumped["service"]["autoscaling"]  # an older agent reads it
    assert CompiledJob.model_validate(dumped) == pods
