"""Bad input gets a precise problem document (field path, what was expected) and writes nothing."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from federation.store.tables import events, jobs, services, tasks
from tests.integration.conftest import Hub, job_manifest, service_manifest

pytestmark = pytest.mark.integration

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return edit


def _drop(path: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[last]

    return edit


ACCEL = "spec.tasks.0.resources.accelerators"
TEMPLATED = {"name": "w", "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}
CASES: list[tuple[str, Edit, str, str]] = [
    ("wrong apiVersion", _set("apiVersion", "v1"), "apiVersion", "suanpan.io/v1"),
    ("wrong kind", _set("kind", "Pod"), "kind", "Job"),
    ("missing metadata", _drop("metadata"), "metadata", ""),
    ("name not DNS-1123", _set("metadata.name", "Train_Job"), "metadata.name", "matches"),
    ("name too long", _set("metadata.name", "a" * 64), "metadata.name", "at most 63"),
    ("bad label key", _set("metadata.labels", {"-bad": "x"}), "metadata.labels", ""),
    ("bad label value", _set("metadata.labels", {"team": "x" * 64}), "metadata.labels", ""),
    ("unknown top field", _set("status", {}), "status", ""),
    ("unknown spec field", _set("spec.nodes", 3), "spec.nodes", ""),
    ("no tasks", _set("spec.tasks", []), "spec.tasks", "at least 1"),
    ("zero replicas", _set("spec.tasks.0.replicas", 0), "spec.tasks[0].replicas", ">= 1"),
    ("too many replicas", _set("spec.tasks.0.replicas", 5000), "spec.tasks[0].replicas", "<= 1024"),
    ("replicas not a number", _set("spec.tasks.0.replicas", "two"), "spec.tasks[0].replicas", ""),
    (
        "bad cpu quantity",
        _set("spec.tasks.0.resources.cpu", "lots"),
        "spec.tasks[0].resources.cpu",
        "",
    ),
    (
        "memory too small",
        _set("spec.tasks.0.resources.memory", "10Ki"),
        "spec.tasks[0].resources.memory",
        "",
    ),
    (
        "zero accelerators",
        _set(f"{ACCEL}.count", 0),
        "spec.tasks[0].resources.accelerators.count",
        ">= 1",
    ),
    (
        "fraction with count 2",
        _set(f"{ACCEL}.fraction", 0.5),
        "spec.tasks[0].resources.accelerators",
        "",
    ),
    (
        "fraction of 1.5",
        _set(f"{ACCEL}.fraction", 1.5),
        "spec.tasks[0].resources.accelerators.fraction",
        "< 1",
    ),
    (
        "NaN fraction",  # json.dumps writes the literal NaN: parsed, then refused as not finite
        _set(f"{ACCEL}.fraction", float("nan")),
        "spec.tasks[0].resources.accelerators.fraction",
        "a finite number",
    ),
    (
        "infinite fraction",
        _set(f"{ACCEL}.fraction", float("-inf")),
        "spec.tasks[0].resources.accelerators.fraction",
        "a finite number",
    ),
    (
        "empty anyOf",
        _set(f"{ACCEL}.anyOf", []),
        "spec.tasks[0].resources.accelerators.anyOf",
        "at least 1",
    ),
    (
        "flavor without vendor",
        _set(f"{ACCEL}.anyOf.0", {"flavor": "H100"}),
        "spec.tasks[0].resources.accelerators.anyOf[0].flavor",
        "matches",
    ),
    (
        "unknown vendor image",
        _set("spec.tasks.0.images", {"amd": "rocm"}),
        "spec.tasks[0].images.amd",
        "",
    ),
    ("no image at all", _set("spec.tasks.0.images", {}), "spec.tasks[0]", ""),
    (
        "duplicate task names",
        _set("spec.tasks", [{"name": "w", "image": "x"}, {"name": "w", "image": "y"}]),
        "spec",
        "",
    ),
    ("bad env name", _set("spec.tasks.0.env", {"1BAD": "x"}), "spec.tasks[0].env.1BAD", ""),
    ("negative max runtime", _set("spec.maxRuntimeSeconds", -5), "spec.maxRuntimeSeconds", ">= 1"),
    ("unknown queue", _set("spec.queue", "nope"), "spec.queue", "an existing queue"),
    ("unknown priority class", _set("spec.priorityClass", "urgent"), "spec.priorityClass", ""),
    ("gang not a bool", _set("spec.gang", "sometimes"), "spec.gang", ""),
    (
        "template sets the scheduler",
        _set("spec.tasks.0.template", {"spec": {"containers": [{"name": "w"}], "nodeName": "n"}}),
        "spec.tasks[0].template.spec.nodeName",
        "",
    ),
    (
        "template asks for devices itself",
        _set(
            "spec.tasks.0.template",
            {
                "spec": {
                    "containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
                }
            },
        ),
        "spec.tasks[0].template.spec.containers[0].resources.limits.nvidia.com/gpu",
        "",
    ),
    (
        "negative backoff limit",
        _set("spec.failurePolicy", {"backoffLimit": -1}),
        "spec.failurePolicy.backoffLimit",
        ">= 0",
    ),
    (
        "backoff limit too high",
        _set("spec.failurePolicy", {"backoffLimit": 101}),
        "spec.failurePolicy.backoffLimit",
        "<= 100",
    ),
    (
        "backoff limit as text",
        _set("spec.failurePolicy", {"backoffLimit": "3"}),
        "spec.failurePolicy.backoffLimit",
        "",
    ),
    (
        "unknown node failure action",
        _set("spec.failurePolicy", {"onNodeFailure": "retry"}),
        "spec.failurePolicy.onNodeFailure",
        "",
    ),
    (
        "unknown cluster failure action",
        _set("spec.failurePolicy", {"onClusterFailure": "ignore"}),
        "spec.failurePolicy.onClusterFailure",
        "",
    ),
    (
        "unknown failure policy field",
        _set("spec.failurePolicy", {"restartPolicy": "Never"}),
        "spec.failurePolicy.restartPolicy",
        "",
    ),
    (
        "short form beside a template",
        _set("spec.tasks.0", {**TEMPLATED, "command": ["x"]}),
        "spec.tasks[0].command",
        "absent",
    ),
]


async def _counts(hub: Hub) -> tuple[int, int, int]:
    async with hub.db.connection() as conn:
        return (
            int(await conn.scalar(sa.select(sa.func.count()).select_from(jobs)) or 0),
            int(await conn.scalar(sa.select(sa.func.count()).select_from(tasks)) or 0),
            int(await conn.scalar(sa.select(sa.func.count()).select_from(events)) or 0),
        )


@pytest.mark.parametrize(("case", "edit", "path", "expected"), CASES, ids=[c[0] for c in CASES])
async def test_bad_manifest_is_rejected_precisely_and_writes_nothing(
    hub: Hub, case: str, edit: Edit, path: str, expected: str
) -> None:
    token = await hub.tenant_with_queue("acme")
    manifest = copy.deepcopy(job_manifest())
    edit(manifest)
    before = await _counts(hub)
    status, problem = await hub.call("POST", "/v1/jobs", token, json=manifest)
    assert status == 422, (case, problem)
    assert problem["status"] == 422 and problem["type"].endswith("/invalid-input")
    paths = [e["path"] for e in problem["errors"]]
    assert any(p == path or p.startswith(path + ".") or p.startswith(path + "[") for p in paths), (
        paths
    )
    if expected:
        assert any(expected in e.get("expected", "") for e in problem["errors"]), problem["errors"]
    assert await _counts(hub) == before


SCALING = "spec.autoscaling"
SERVER_CONTAINER = {"name": "server", "image": "vllm"}
SERVICE_CASES: list[tuple[str, Edit, str, str]] = [
    ("a job's kind", _set("kind", "Job"), "kind", "Service"),
    ("a name starting with a digit", _set("metadata.name", "1chat"), "metadata.name", ""),
    (
        "a pods metric without a port",
        _set("spec.autoscaling.metric", {"name": "m", "target": 4}),
        "spec.autoscaling.metric",
        "",
    ),
    (
        "device utilization with a port",
        _set("spec.autoscaling.metric", {"source": "devices", "target": 70, "port": 9}),
        "spec.autoscaling.metric",
        "",
    ),
    (
        "device utilization above 100 %",
        _set("spec.autoscaling.metric", {"source": "devices", "target": 120}),
        "spec.autoscaling.metric",
        "",
    ),
    ("no ports", _set("spec.ports", []), "spec.ports", "at least 1"),
    ("port 0", _set("spec.ports.0.port", 0), "spec.ports[0].port", ">= 1"),
    ("port 65536", _set("spec.ports.0.port", 65536), "spec.ports[0].port", "<= 65535"),
    ("port name not DNS", _set("spec.ports.0.name", "HTTP"), "spec.ports[0].name", "matches"),
    ("unknown protocol", _set("spec.ports.0.protocol", "QUIC"), "spec.ports[0].protocol", ""),
    (
        "two ports of one number",
        _set("spec.ports", [{"name": "a", "port": 80}, {"name": "b", "port": 80}]),
        "spec",
        "",
    ),
    ("spread 0", _set("spec.spread.clusters", 0), "spec.spread.clusters", ">= 1"),
    ("spread 17", _set("spec.spread.clusters", 17), "spec.spread.clusters", "<= 16"),
    ("spread beyond maxReplicas", _set("spec.server.maxReplicas", 1), "spec", ""),
    ("minReplicas above maxReplicas", _set("spec.server.minReplicas", 9), "spec.server", ""),
    ("fixed and elastic replicas", _set("spec.server.replicas", 2), "spec.server", ""),
    ("bounds without autoscaling", _drop(SCALING), "spec", ""),
    (
        "autoscaling without bounds",
        _set("spec.server", {"replicas": 2, "image": "vllm"}),
        "spec",
        "",
    ),
    ("metric name", _set(f"{SCALING}.metric.name", "1-bad"), f"{SCALING}.metric.name", "matches"),
    ("target 0", _set(f"{SCALING}.metric.target", 0), f"{SCALING}.metric.target", "> 0"),
    ("target as text", _set(f"{SCALING}.metric.target", "4"), f"{SCALING}.metric.target", ""),
    ("metric port", _set(f"{SCALING}.metric.port", 0), f"{SCALING}.metric.port", ">= 1"),
    ("relative path", _set(f"{SCALING}.metric.path", "metrics"), f"{SCALING}.metric.path", ""),
    ("tolerance 1", _set(f"{SCALING}.tolerance", 1), f"{SCALING}.tolerance", "< 1"),
    (
        "an hour and more",
        _set(f"{SCALING}.scaleDownStabilizationSeconds", 3601),
        f"{SCALING}.scaleDownStabilizationSeconds",
        "<= 3600",
    ),
    ("unknown server field", _set("spec.server.gang", True), "spec.server.gang", ""),
    ("no image", _drop("spec.server.image"), "spec.server", ""),
    (
        "probe of two actions",
        _set(
            "spec.server.template",
            {
                "spec": {
                    "containers": [
                        {
                            **SERVER_CONTAINER,
                            "readinessProbe": {
                                "httpGet": {"path": "/health", "port": 8000},
                                "tcpSocket": {"port": 8000},
                            },
                        }
                    ]
                }
            },
        ),
        "spec.server",
        "",
    ),
    (
        "privileged server",
        _set(
            "spec.server",
            {
                "minReplicas": 1,
                "maxReplicas": 8,
                "template": {
                    "spec": {
                        "containers": [
                            {**SERVER_CONTAINER, "securityContext": {"privileged": True}}
                        ]
                    }
                },
            },
        ),
        "spec.server.template.spec.containers[0].securityContext.privileged",
        "allowed by the tenant's policy",
    ),
    (
        "short form beside a template",
        _set("spec.server.template", {"spec": {"containers": [SERVER_CONTAINER]}}),
        "spec.server.image",
        "absent",
    ),
    ("unknown queue", _set("spec.queue", "nope"), "spec.queue", "an existing queue"),
    ("unknown priority class", _set("spec.priorityClass", "urgent"), "spec.priorityClass", ""),
]


@pytest.mark.parametrize(
    ("case", "edit", "path", "expected"), SERVICE_CASES, ids=[c[0] for c in SERVICE_CASES]
)
async def test_bad_service_is_rejected_precisely_and_writes_nothing(
    hub: Hub, case: str, edit: Edit, path: str, expected: str
) -> None:
    token = await hub.tenant_with_queue("acme")
    manifest = copy.deepcopy(service_manifest())
    edit(manifest)
    for method, target in (("POST", "/v1/services"), ("PUT", "/v1/services/chat")):
        status, problem = await hub.call(method, target, token, json=manifest)
        assert status == 422, (case, method, problem)
        assert problem["type"].endswith("/invalid-input")
        paths = [e["path"] for e in problem["errors"]]
        assert any(p == path or p.startswith((path + ".", path + "[")) for p in paths), paths
        if expected:
            assert any(expected in e.get("expected", "") for e in problem["errors"]), problem
    async with hub.db.connection() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(services)) == 0


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"limit": "0"}, "query.limit"),
        ({"state": "Running"}, "query.state"),
        ({"cursor": "!!!"}, "query.cursor"),
        ({"color": "red"}, "query.color"),
    ],
)
async def test_bad_service_list_queries_name_the_parameter(
    hub: Hub, params: dict[str, str], path: str
) -> None:
    status, problem = await hub.call("GET", "/v1/services", params=params)
    assert status == 422
    assert [e["path"] for e in problem["errors"]] == [path]


async def test_service_idempotency_key_too_long_is_rejected(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    status, problem = await hub.call(
        "POST",
        "/v1/services",
        token,
        json=service_manifest(),
        headers={"Idempotency-Key": "k" * 129},
    )
    assert status == 422 and problem["errors"][0]["path"] == "header.Idempotency-Key"


@pytest.mark.parametrize(
    ("body", "ctype", "detail"),
    [
        ("{not json", "application/json", "not valid JSON"),
        ("a: [unclosed", "application/yaml", "not valid YAML"),
        ("", "application/json", "body is required"),
        ("[1, 2]", "application/json", "(body)"),
    ],
)
async def test_unparseable_bodies_are_rejected(
    hub: Hub, body: str, ctype: str, detail: str
) -> None:
    token = await hub.tenant_with_queue("acme")
    status, problem = await hub.call(
        "POST", "/v1/jobs", token, data=body, headers={"Content-Type": ctype}
    )
    assert status == 422
    assert detail in problem["detail"] or detail in str(problem.get("errors"))
    assert (await _counts(hub))[0] == 0


async def test_oversized_body_is_413(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    manifest = job_manifest()
    manifest["spec"]["tasks"][0]["env"] = {"BIG": "x" * (2 << 20)}
    status, problem = await hub.call("POST", "/v1/jobs", token, json=manifest)
    assert status == 413 and problem["status"] == 413


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"limit": "0"}, "query.limit"),
        ({"limit": "many"}, "query.limit"),
        ({"limit": "501"}, "query.limit"),  # above the documented maximum
        ({"state": "Sleeping"}, "query.state"),
        ({"label": "novalue"}, "query.label"),
        ({"color": "red"}, "query.color"),
    ],
)
async def test_bad_list_queries_name_the_parameter(
    hub: Hub, params: dict[str, str], path: str
) -> None:
    status, problem = await hub.call("GET", "/v1/jobs", params=params)
    assert status == 422
    assert [e["path"] for e in problem["errors"]] == [path]


async def test_malformed_cursor_is_invalid_input(hub: Hub) -> None:
    status, problem = await hub.call("GET", "/v1/jobs", params={"cursor": "!!!"})
    assert status == 422 and "cursor" in problem["detail"]


async def test_idempotency_key_too_long_is_rejected(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    status, problem = await hub.call(
        "POST", "/v1/jobs", token, json=job_manifest(), headers={"Idempotency-Key": "k" * 129}
    )
    assert status == 422 and problem["errors"][0]["path"] == "header.Idempotency-Key"
    assert (await _counts(hub))[0] == 0


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"name": "q", "weight": 0}, "weight"),
        ({"name": "q", "quota": {"gpu!": {"nominal": 1}}}, "quota.gpu!"),
        ({"name": "q", "quota": {"cpu": {"nominal": -1}}}, "quota.cpu.nominal"),
        ({"name": "Q"}, "name"),
    ],
)
async def test_bad_queue_definitions(hub: Hub, body: dict[str, Any], path: str) -> None:
    await hub.call("POST", "/v1/tenants", json={"name": "acme"})
    status, problem = await hub.call("POST", "/v1/tenants/acme/queues", json=body)
    assert status == 422
    assert any(e["path"].startswith(path) for e in problem["errors"]), problem
