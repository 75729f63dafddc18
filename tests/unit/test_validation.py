"""The shared validators: Kubernetes names and labels exactly, strict JSON types, no NUL."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from api.schemas import QueueIn, TenantIn
from federation.k8s_names import label_map, qualified_name
from federation.spec import JobManifest
from federation.wire.agent import InventoryReport, Registration, StatusReport

GOOD_KEYS = ["a", "app", "A.b_c-d", "example.com/app", "a.b.c/x", "k8s.io/" + "n" * 63, "x" * 63]
BAD_KEYS = [
    "",
    "-a",
    "a-",
    "a\n",
    "a ",
    "/a",
    "a/",
    "Example.com/a",
    "a_b.com/x",
    "x" * 64,
    "p" * 254 + "/a",
    "a/b/c",
    "ä",
    "a\x00",
]


@pytest.mark.parametrize("key", GOOD_KEYS)
def test_qualified_names_kubernetes_accepts(key: str) -> None:
    assert qualified_name(key)


@pytest.mark.parametrize("key", BAD_KEYS)
def test_qualified_names_kubernetes_refuses(key: str) -> None:
    assert not qualified_name(key)


@pytest.mark.parametrize("value", ["", "a", "a.b-c_d", "A1", "v" * 63])
def test_label_values_kubernetes_accepts(value: str) -> None:
    assert label_map({"k": value}) == {"k": value}


@pytest.mark.parametrize("value", ["-a", "a-", "a\n", "\na", "a b", "v" * 64, "é", "a\x00", "a/b"])
def test_label_values_kubernetes_refuses(value: str) -> None:
    with pytest.raises(ValueError, match="not a valid label value"):
        label_map({"k": value})


MANIFEST: dict[str, Any] = {
    "apiVersion": "suanpan.io/v1",
    "kind": "Job",
    "metadata": {"name": "train"},
    "spec": {"queue": "default", "tasks": [{"name": "w", "image": "x:1"}]},
}


def _manifest(**task: Any) -> str:
    import json

    doc = json.loads(json.dumps(MANIFEST))
    doc["spec"]["tasks"][0].update(task)
    return json.dumps(doc)


def test_a_valid_manifest_passes_strictly() -> None:
    parsed = JobManifest.model_validate_json(
        _manifest(images={"nvidia": "a:1"}, resources={"cpu": 8, "memory": "1Gi"}), strict=True
    )
    assert parsed.spec.tasks[0].resources.cpu == "8"


@pytest.mark.parametrize(
    "task",
    [
        {"replicas": True},
        {"replicas": "1"},
        {"replicas": 1.0},
        {"image": 1},
        {"command": "run"},
        {"env": {"A": 1}},
        {"resources": {"cpu": True}},
        {"resources": {"cpu": -1}},
        {"resources": {"memory": "1 Gi"}},
        {"image": "a\x00"},
        {"args": ["\x00"]},
        {"annotations": {"a": "\x00"}},
        {"annotations": {"not a key": "x"}},
        {"name": "w\n"},
    ],
)
def test_wrong_types_and_hostile_strings_are_refused(task: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        JobManifest.model_validate_json(_manifest(**task), strict=True)


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (TenantIn, '{"name": "t", "displayName": "a\\u0000"}'),
        (TenantIn, '{"name": "t\\n"}'),
        (QueueIn, '{"name": "q", "weight": "2"}'),
        (QueueIn, '{"name": "q", "weight": true}'),
        (Registration, '{"cluster": "c", "zone": "z\\n"}'),
        (Registration, '{"cluster": "c", "kubernetesVersion": "\\u0000"}'),
        (InventoryReport, '{"generation": 9223372036854775808, "full": true}'),
        (InventoryReport, '{"generation": 1, "full": 1}'),
        (StatusReport, '{"updates": [{"job": "x", "epoch": 1, "state": "Running"}]}'),
    ],
)
def test_api_and_wire_models_are_strict(model: type[BaseModel], body: str) -> None:
    with pytest.raises(ValidationError):
        model.model_validate_json(body, strict=True)


@pytest.mark.parametrize(
    ("checkpoint", "field"),
    [
        ({"intervalSeconds": 0}, "intervalSeconds"),
        ({"gracePeriodSeconds": -1}, "gracePeriodSeconds"),
        ({"gracePeriodSeconds": 3601}, "gracePeriodSeconds"),
        ({"gracePeriodSeconds": "30"}, "gracePeriodSeconds"),
        ({"every": 5}, "every"),
    ],
)
def test_bad_checkpoint_fields_are_refused_with_their_path(
    checkpoint: dict[str, Any], field: str
) -> None:
    import json

    doc = json.loads(_manifest())
    doc["spec"]["checkpoint"] = checkpoint
    with pytest.raises(ValidationError) as caught:
        JobManifest.model_validate_json(json.dumps(doc), strict=True)
    assert [e["loc"] for e in caught.value.errors()] == [("spec", "checkpoint", field)]
