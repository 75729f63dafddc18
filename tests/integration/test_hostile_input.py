"""Hostile input: NUL characters, nesting that exhausts parsers, integers beyond the database's
range and values of the wrong JSON type each get a 4xx problem document naming the field, and
change nothing; never a 500, never a silent coercion."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from federation.store.tables import metadata
from tests.integration.conftest import Hub, job_manifest

pytestmark = pytest.mark.integration

NUL = "a\x00b"
BIG = 2**63  # one past PostgreSQL's bigint
Edit = Callable[[dict[str, Any]], None]


async def _rows(hub: Hub) -> dict[str, int]:
    """Rows per table, but the audit trail's: a refused request is recorded there by design."""
    async with hub.db.connection() as conn:
        return {
            t.name: int(await conn.scalar(sa.select(sa.func.count()).select_from(t)) or 0)
            for t in metadata.sorted_tables
            if t.name != "audit_log"
        }


def _at(path: str, value: Any) -> Edit:
    """Set `value` at a dotted path (digits index lists; the last part may be a new key)."""

    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[int(last) if last.isdigit() else last] = value

    return edit


T = "spec.tasks.0"
ACC = f"{T}.resources.accelerators"
MANIFEST_CASES: list[tuple[str, Edit, str]] = [
    # NUL in every stored string
    ("nul image", _at(f"{T}.image", NUL), "spec.tasks[0].image"),
    ("nul vendor image", _at(f"{T}.images.nvidia", NUL), "spec.tasks[0].images.nvidia"),
    ("nul flavor image", _at(f"{ACC}.anyOf.0.image", NUL), f"{ACC.replace('.0', '[0]')}"),
    ("nul command", _at(f"{T}.command", ["python", NUL]), "spec.tasks[0].command[1]"),
    ("nul args", _at(f"{T}.args", [NUL]), "spec.tasks[0].args[0]"),
    ("nul env value", _at(f"{T}.env", {"A": NUL}), "spec.tasks[0].env.A"),
    ("nul env name", _at(f"{T}.env", {NUL: "x"}), "spec.tasks[0].env"),
    ("nul annotation value", _at(f"{T}.annotations", {"a": NUL}), "spec.tasks[0].annotations"),
    ("nul annotation key", _at(f"{T}.annotations", {NUL: "x"}), "spec.tasks[0].annotations"),
    ("nul label value", _at("metadata.labels", {"team": NUL}), "metadata.labels"),
    ("nul label key", _at("metadata.labels", {NUL: "x"}), "metadata.labels"),
    ("nul name", _at("metadata.name", NUL), "metadata.name"),
    ("nul tenant", _at("metadata.tenant", NUL), "metadata.tenant"),
    ("nul queue", _at("spec.queue", NUL), "spec.queue"),
    ("nul priority class", _at("spec.priorityClass", NUL), "spec.priorityClass"),
    ("nul flavor", _at(f"{ACC}.anyOf.0.flavor", f"nvidia/{NUL}"), "anyOf[0].flavor"),
    ("nul region", _at("spec.placement.regions", [NUL]), "spec.placement.regions[0]"),
    ("nul cpu", _at(f"{T}.resources.cpu", "8\x00"), "spec.tasks[0].resources.cpu"),
    # integers beyond any column
    ("huge replicas", _at(f"{T}.replicas", BIG), "spec.tasks[0].replicas"),
    ("huge count", _at(f"{ACC}.count", 10**40), "accelerators.count"),
    ("huge runtime", _at("spec.maxRuntimeSeconds", BIG), "spec.maxRuntimeSeconds"),
    ("huge flavor count", _at(f"{ACC}.anyOf.0.count", BIG), "anyOf[0].count"),
    ("huge cpu number", _at(f"{T}.resources.cpu", 10**30), "spec.tasks[0].resources.cpu"),
    ("huge exponent", _at(f"{T}.resources.memory", "1e99999999"), "resources.memory"),
    # wrong JSON types are refused, not converted
    ("bool replicas", _at(f"{T}.replicas", True), "spec.tasks[0].replicas"),
    ("string replicas", _at(f"{T}.replicas", "2"), "spec.tasks[0].replicas"),
    ("float replicas", _at(f"{T}.replicas", 2.0), "spec.tasks[0].replicas"),
    ("string gang", _at("spec.gang", "off"), "spec.gang"),
    ("int gang", _at("spec.gang", 0), "spec.gang"),
    ("string preemptible", _at("spec.preemptible", "true"), "spec.preemptible"),
    ("bool count", _at(f"{ACC}.count", True), "accelerators.count"),
    ("bool cpu", _at(f"{T}.resources.cpu", True), "spec.tasks[0].resources.cpu"),
    ("float cpu", _at(f"{T}.resources.cpu", 0.5), "spec.tasks[0].resources.cpu"),
    ("string fraction", _at(f"{ACC}.fraction", "0.5"), "accelerators.fraction"),
    ("number image", _at(f"{T}.image", 5), "spec.tasks[0].image"),
    ("list labels", _at("metadata.labels", ["a=b"]), "metadata.labels"),
    # quantities: Kubernetes' ASCII grammar exactly
    ("fullwidth cpu", _at(f"{T}.resources.cpu", "１６"), "spec.tasks[0].resources.cpu"),
    ("arabic-indic cpu", _at(f"{T}.resources.cpu", "٨"), "spec.tasks[0].resources.cpu"),
    ("spaced cpu", _at(f"{T}.resources.cpu", " 8"), "spec.tasks[0].resources.cpu"),
    ("cpu trailing space", _at(f"{T}.resources.cpu", "8 "), "spec.tasks[0].resources.cpu"),
    ("cpu newline", _at(f"{T}.resources.cpu", "8\n"), "spec.tasks[0].resources.cpu"),
    ("memory lower gi", _at(f"{T}.resources.memory", "64gi"), "resources.memory"),
    ("memory two dots", _at(f"{T}.resources.memory", "1.5.5Gi"), "resources.memory"),
    ("memory spaced unit", _at(f"{T}.resources.memory", "64 Gi"), "resources.memory"),
    ("min memory fullwidth", _at(f"{ACC}.minMemory", "８0Gi"), "accelerators.minMemory"),
    # anchored patterns: a trailing newline never passes
    ("label value newline", _at("metadata.labels", {"team": "nlp\n"}), "metadata.labels"),
    ("label key newline", _at("metadata.labels", {"team\n": "nlp"}), "metadata.labels"),
    ("label prefix too long", _at("metadata.labels", {"a" * 254 + "/k": "v"}), "metadata.labels"),
    ("name newline", _at("metadata.name", "train\n"), "metadata.name"),
    ("queue newline", _at("spec.queue", "default\n"), "spec.queue"),
    ("env name newline", _at(f"{T}.env", {"A\n": "x"}), "spec.tasks[0].env"),
    ("flavor newline", _at(f"{ACC}.anyOf.0.flavor", "nvidia/H100\n"), "anyOf[0].flavor"),
    ("annotation key space", _at(f"{T}.annotations", {"bad key": "x"}), "annotations"),
    (
        "annotations too big",
        _at(f"{T}.annotations", {"a": "x" * 4096} | {f"k{i}": "x" * 4096 for i in range(63)}),
        "annotations",
    ),
    ("image with space", _at(f"{T}.image", "pytorch:2.4 "), "spec.tasks[0].image"),
    ("image empty", _at(f"{T}.image", ""), "spec.tasks[0].image"),
]


@pytest.mark.parametrize(
    ("case", "edit", "path"), MANIFEST_CASES, ids=[c[0] for c in MANIFEST_CASES]
)
async def test_hostile_manifest_is_a_422_naming_the_field(
    hub: Hub, case: str, edit: Edit, path: str
) -> None:
    token = await hub.tenant_with_queue("acme")
    manifest = copy.deepcopy(job_manifest())
    edit(manifest)
    before = await _rows(hub)
    status, problem = await hub.call("POST", "/v1/jobs", token, json=manifest)
    assert status == 422, (case, status, problem)
    assert problem["type"].endswith("/invalid-input")
    assert any(path in e["path"] for e in problem["errors"]), (path, problem["errors"])
    assert await _rows(hub) == before


async def test_a_nul_is_named_as_such(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    manifest = job_manifest()
    manifest["spec"]["tasks"][0]["env"] = {"A": NUL}
    _, problem = await hub.call("POST", "/v1/jobs", token, json=manifest)
    assert "NUL" in problem["errors"][0]["message"]


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("body", "ctype"),
    [
        (_deep(100_000), "application/json"),
        ('{"apiVersion": ' + _deep(5000) + "}", "application/json"),
        ("a: " + "[" * 100_000, "application/yaml"),
        ("- " * 5000 + "x", "application/yaml"),
        ("a: &x [1]\nb: *x", "application/yaml"),  # aliases: the seed of expansion bombs
        ("a: !!binary aGVsbG8=", "application/yaml"),  # not representable as JSON
        ("a: !!set {x}", "application/yaml"),
        ("a: .nan", "application/yaml"),
        (b"\xff\xfe{}", "application/json"),
    ],
    ids=[
        "deep-json",
        "deep-json-field",
        "deep-yaml-flow",
        "deep-yaml-block",
        "yaml-alias",
        "yaml-binary",
        "yaml-set",
        "yaml-nan",
        "not-utf8",
    ],
)
async def test_unparseable_bodies_are_a_422(hub: Hub, body: str | bytes, ctype: str) -> None:
    token = await hub.tenant_with_queue("acme")
    before = await _rows(hub)
    status, problem = await hub.call(
        "POST", "/v1/jobs", token, data=body, headers={"Content-Type": ctype}
    )
    assert status == 422, problem
    assert problem["type"].endswith("/invalid-input")
    assert await _rows(hub) == before


def _yaml(labels: str = "{team: nlp}", gang: str = "true", replicas: str = "2") -> str:
    return f"""
apiVersion: suanpan.io/v1
kind: Job
metadata: {{name: train, labels: {labels}}}
spec:
  queue: default
  gang: {gang}
  tasks:
  - {{name: w, replicas: {replicas}, image: "pytorch:2.4"}}
"""


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ("{day: 2024-01-01}", {"day": "2024-01-01"}),  # no timestamps
        ("{enabled: on, country: NO, ok: yes}", {"enabled": "on", "country": "NO", "ok": "yes"}),
    ],
)
async def test_yaml_is_read_by_the_core_schema(
    hub: Hub, labels: str, expected: dict[str, str]
) -> None:
    token = await hub.tenant_with_queue("acme")
    status, job = await hub.call(
        "POST", "/v1/jobs", token, data=_yaml(labels), headers={"Content-Type": "application/yaml"}
    )
    assert status == 201, job
    assert job["labels"] == expected


async def test_an_inventory_in_yaml_is_415(hub: Hub) -> None:
    token = await _agent(hub)
    nodes = "".join(f"- {{name: n{i}, cpuMilli: 1000, memoryMib: 1024}}\n" for i in range(30_000))
    status, problem = await hub.call(
        "POST",
        "/v1/agent/inventory",
        token,
        data=f"generation: 1\nfull: true\nnodes:\n{nodes}",
        headers={"Content-Type": "application/yaml"},
    )
    assert status == 415 and "JSON only" in problem["detail"], problem


async def test_yaml_numbers_are_decimal(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    status, job = await hub.call(
        "POST", "/v1/jobs", token, data=_yaml(replicas="010"), headers={"Content-Type": "text/yaml"}
    )
    assert status == 201 and job["spec"]["spec"]["tasks"][0]["replicas"] == 10, job


@pytest.mark.parametrize("gang", ["off", "no", "on", "yes", '"true"', "1"])
async def test_a_yaml_word_is_not_a_boolean(hub: Hub, gang: str) -> None:
    token = await hub.tenant_with_queue("acme")
    status, problem = await hub.call(
        "POST", "/v1/jobs", token, data=_yaml(gang=gang), headers={"Content-Type": "text/yaml"}
    )
    assert status == 422 and problem["errors"][0]["path"] == "spec.gang", problem


ADMIN_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("nul display name", "/v1/tenants", {"name": "t", "displayName": NUL}, "displayName"),
    ("number display name", "/v1/tenants", {"name": "t", "displayName": 5}, "displayName"),
    ("nul tenant name", "/v1/tenants", {"name": NUL}, "name"),
    ("nul queue name", "/v1/tenants/acme/queues", {"name": NUL}, "name"),
    ("nul cohort", "/v1/tenants/acme/queues", {"name": "q", "cohort": NUL}, "cohort"),
    (
        "nul quota key",
        "/v1/tenants/acme/queues",
        {"name": "q", "quota": {NUL: {"nominal": 1}}},
        "quota",
    ),
    ("bool weight", "/v1/tenants/acme/queues", {"name": "q", "weight": True}, "weight"),
    ("string weight", "/v1/tenants/acme/queues", {"name": "q", "weight": "1"}, "weight"),
    (
        "string nominal",
        "/v1/tenants/acme/queues",
        {"name": "q", "quota": {"cpu": {"nominal": "5"}}},
        "quota.cpu.nominal",
    ),
    (
        "bool nominal",
        "/v1/tenants/acme/queues",
        {"name": "q", "quota": {"cpu": {"nominal": True}}},
        "quota.cpu.nominal",
    ),
    (
        "huge nominal",
        "/v1/tenants/acme/queues",
        {"name": "q", "quota": {"cpu": {"nominal": BIG}}},
        "quota.cpu.nominal",
    ),
    ("nul token name", "/v1/tokens", {"name": NUL, "role": "admin"}, "name"),
    ("nul token cluster", "/v1/tokens", {"name": "a", "role": "agent", "cluster": NUL}, "cluster"),
]


@pytest.mark.parametrize(
    ("case", "path", "body", "field"), ADMIN_CASES, ids=[c[0] for c in ADMIN_CASES]
)
async def test_hostile_admin_bodies_are_a_422(
    hub: Hub, case: str, path: str, body: dict[str, Any], field: str
) -> None:
    await hub.tenant_with_queue("acme")
    before = await _rows(hub)
    status, problem = await hub.call("POST", path, json=body)
    assert status == 422, (case, problem)
    assert any(e["path"].startswith(field) for e in problem["errors"]), problem
    assert await _rows(hub) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"version": 2**31}, "version"),
        ({"version": BIG}, "version"),
        ({"version": "1"}, "version"),
        ({"version": True}, "version"),
        ({"weight": False}, "weight"),
        ({"cohort": NUL}, "cohort"),
    ],
)
async def test_hostile_queue_patches_are_a_422(hub: Hub, body: dict[str, Any], field: str) -> None:
    await hub.tenant_with_queue("acme")
    status, problem = await hub.call("PATCH", "/v1/tenants/acme/queues/default", json=body)
    assert status == 422, problem
    assert problem["errors"][0]["path"] == field


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


QUERY_CASES: list[tuple[str, str, dict[str, str], str]] = [
    ("huge after", "events", {"after": str(BIG)}, "query.after"),
    ("20 digit after", "events", {"after": "9" * 20}, "query.after"),
    ("negative after", "events", {"after": "-1"}, "query.after"),
    ("signed limit", "jobs", {"limit": "+5"}, "query.limit"),
    ("spaced limit", "jobs", {"limit": " 5"}, "query.limit"),
    ("fullwidth limit", "jobs", {"limit": "５"}, "query.limit"),
    ("float limit", "jobs", {"limit": "5.0"}, "query.limit"),
    ("exponent limit", "jobs", {"limit": "1e2"}, "query.limit"),
    ("underscore limit", "jobs", {"limit": "1_0"}, "query.limit"),
    ("repeated limit", "jobs", {"limit": "5&limit=6"}, "query.limit"),
    ("huge cursor", "jobs", {"cursor": _cursor(f"s:{BIG}")}, "query.cursor"),
    ("fullwidth cursor", "jobs", {"cursor": _cursor("s:１２")}, "query.cursor"),
    ("nul cursor", "jobs", {"cursor": "a\x00"}, "query.cursor"),
    ("nul tenant", "jobs", {"tenant": NUL}, "query.tenant"),
    ("nul label", "jobs", {"label": "a=\x00"}, "query.label"),
    ("invalid label", "jobs", {"label": "a b=c"}, "query.label"),
    ("newline state", "jobs", {"state": "Queued\n"}, "query.state"),
]


@pytest.mark.parametrize(
    ("case", "what", "params", "field"), QUERY_CASES, ids=[c[0] for c in QUERY_CASES]
)
async def test_hostile_query_parameters_are_a_422(
    hub: Hub, case: str, what: str, params: dict[str, str], field: str
) -> None:
    token = await hub.tenant_with_queue("acme")
    status, job = await hub.call("POST", "/v1/jobs", token, json=job_manifest())
    assert status == 201
    path = f"/v1/jobs/{job['id']}/events" if what == "events" else "/v1/jobs"
    if "&" in next(iter(params.values())):
        path += "?" + "&".join(f"{k}={v}" for k, v in params.items())
        params = {}
    status, problem = await hub.call("GET", path, params=params)
    assert status == 422, (case, problem)
    assert [e["path"] for e in problem["errors"]] == [field], problem


@pytest.mark.parametrize(
    "path",
    [
        "/v1/tenants/a%00b",
        "/v1/tenants/acme/queues/a%00b",
        "/v1/clusters/a%00b",
        "/v1/jobs/a%00b",
    ],
)
async def test_nul_in_a_path_names_nothing(hub: Hub, path: str) -> None:
    await hub.tenant_with_queue("acme")
    status, problem = await hub.call("GET", path)
    assert status == 404 and problem["type"].endswith("/not-found"), problem


async def test_a_job_id_is_read_only_in_its_canonical_form(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    _, job = await hub.call("POST", "/v1/jobs", token, json=job_manifest())
    canonical = job["id"]
    assert (await hub.call("GET", f"/v1/jobs/{canonical.upper()}"))[0] == 200
    for other in (
        canonical.replace("-", ""),
        "{" + canonical + "}",
        "urn:uuid:" + canonical,
        " " + canonical,
    ):
        status, problem = await hub.call("GET", f"/v1/jobs/{other}")
        assert status == 404 and problem["type"].endswith("/not-found"), other


async def _agent(hub: Hub) -> str:
    _, issued = await hub.call(
        "POST", "/v1/tokens", json={"name": "c1-agent", "role": "agent", "cluster": "c1"}
    )
    token = str(issued["token"])
    status, _ = await hub.call("POST", "/v1/agent/register", token, json={"cluster": "c1"})
    assert status == 200
    return token


NODE = {"name": "n1", "cpuMilli": 1000, "memoryMib": 1024}
AGENT_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("nul region", "register", {"cluster": "c1", "region": NUL}, "region"),
    ("region not a label value", "register", {"cluster": "c1", "region": "bei jing"}, "region"),
    ("nul version", "register", {"cluster": "c1", "agentVersion": NUL}, "agentVersion"),
    ("nul cluster label", "register", {"cluster": "c1", "labels": {"a": NUL}}, "labels"),
    ("huge generation", "inventory", {"generation": BIG, "full": True}, "generation"),
    ("string generation", "inventory", {"generation": "1", "full": True}, "generation"),
    ("string full", "inventory", {"generation": 1, "full": "true"}, "full"),
    (
        "nul node name",
        "inventory",
        {"generation": 1, "full": True, "nodes": [NODE | {"name": NUL}]},
        "nodes[0].name",
    ),
    (
        "nul node label",
        "inventory",
        {"generation": 1, "full": True, "nodes": [NODE | {"labels": {"k": NUL}}]},
        "nodes[0].labels",
    ),
    (
        "nul taint",
        "inventory",
        {"generation": 1, "full": True, "nodes": [NODE | {"taints": [{"key": NUL}]}]},
        "nodes[0].taints[0].key",
    ),
    (
        "huge cpu",
        "inventory",
        {"generation": 1, "full": True, "nodes": [NODE | {"cpuMilli": BIG}]},
        "nodes[0].cpuMilli",
    ),
    (
        "huge pods",
        "inventory",
        {"generation": 1, "full": True, "nodes": [NODE | {"pods": 2**31}]},
        "nodes[0].pods",
    ),
    (
        "bool pods",
        "inventory",
        {"generation": 1, "full": True, "nodes": [NODE | {"pods": True}]},
        "nodes[0].pods",
    ),
    (
        "huge device memory",
        "inventory",
        {
            "generation": 1,
            "full": True,
            "nodes": [
                NODE | {"devices": [{"flavor": "nvidia/H100", "index": 0, "memoryMib": BIG}]}
            ],
        },
        "nodes[0].devices[0].memoryMib",
    ),
    (
        "nul device flavor",
        "inventory",
        {
            "generation": 1,
            "full": True,
            "nodes": [NODE | {"devices": [{"flavor": NUL, "index": 0, "memoryMib": 1}]}],
        },
        "nodes[0].devices[0].flavor",
    ),
    (
        "int healthy",
        "inventory",
        {
            "generation": 1,
            "full": True,
            "nodes": [
                NODE | {"devices": [{"flavor": "x", "index": 0, "memoryMib": 1, "healthy": 1}]}
            ],
        },
        "nodes[0].devices[0].healthy",
    ),
    ("nul removed", "inventory", {"generation": 1, "full": False, "removed": [NUL]}, "removed[0]"),
    (
        "huge epoch",
        "status",
        {
            "updates": [
                {"job": "00000000-0000-0000-0000-000000000001", "epoch": BIG, "state": "Running"}
            ]
        },
        "updates[0].epoch",
    ),
    (
        "string epoch",
        "status",
        {
            "updates": [
                {"job": "00000000-0000-0000-0000-000000000001", "epoch": "1", "state": "Running"}
            ]
        },
        "updates[0].epoch",
    ),
    (
        "huge running",
        "status",
        {
            "updates": [
                {
                    "job": "00000000-0000-0000-0000-000000000001",
                    "epoch": 1,
                    "state": "Running",
                    "running": 2**31,
                }
            ]
        },
        "updates[0].running",
    ),
    (
        "nul message",
        "status",
        {
            "updates": [
                {
                    "job": "00000000-0000-0000-0000-000000000001",
                    "epoch": 1,
                    "state": "Failed",
                    "message": NUL,
                }
            ]
        },
        "updates[0].message",
    ),
    (
        "nul reason",
        "status",
        {
            "updates": [
                {
                    "job": "00000000-0000-0000-0000-000000000001",
                    "epoch": 1,
                    "state": "Failed",
                    "reason": NUL,
                }
            ]
        },
        "updates[0].reason",
    ),
]


@pytest.mark.parametrize(
    ("case", "op", "body", "field"), AGENT_CASES, ids=[c[0] for c in AGENT_CASES]
)
async def test_hostile_agent_reports_are_a_422(
    hub: Hub, case: str, op: str, body: dict[str, Any], field: str
) -> None:
    token = await _agent(hub)
    before = await _rows(hub)
    status, problem = await hub.call("POST", f"/v1/agent/{op}", token, json=body)
    assert status == 422, (case, problem)
    assert any(e["path"].startswith(field) for e in problem["errors"]), problem
    assert await _rows(hub) == before


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"after": str(BIG)}, "query.after"),
        ({"after": "1.5"}, "query.after"),
        ({"wait": "inf"}, "query.wait"),
        ({"wait": "nan"}, "query.wait"),
        ({"wait": "1e1"}, "query.wait"),
        ({"wait": "61"}, "query.wait"),
    ],
)
async def test_hostile_long_poll_parameters_are_a_422(
    hub: Hub, params: dict[str, str], field: str
) -> None:
    token = await _agent(hub)
    status, problem = await hub.call("GET", "/v1/agent/assignments", token, params=params)
    assert status == 422, problem
    assert [e["path"] for e in problem["errors"]] == [field]


async def test_idempotency_key_must_be_printable_ascii(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    for key in ("", "k" * 129, "clé", "a b"):
        status, problem = await hub.call(
            "POST", "/v1/jobs", token, json=job_manifest(), headers={"Idempotency-Key": key}
        )
        assert status == 422, (key, problem)
        assert problem["errors"][0]["path"] == "header.Idempotency-Key"
