"""The same templated job placed on each vendor of the catalog renders pods that differ exactly
as the catalog says: the device resource, the vendor's image, its tolerations and, where the
vendor's plugin needs it, the visible-devices variable read from the extender's bind."""

from __future__ import annotations

from typing import Any

import pytest

from cluster_agents.agent.render import render
from cluster_agents.backends.k8s_render import owner_reference, render_pod
from federation.catalog import AcceleratorModel, Vendor, load_catalog
from federation.wire import annotations as ann
from tests.compiled_jobs import assignment

CATALOG = load_catalog()
FIRST = {m.vendor: m for m in reversed(list(CATALOG.models.values()))}  # first model per vendor


def _task(model: AcceleratorModel) -> dict[str, Any]:
    return {
        "name": "train",
        "replicas": 2,
        "images": {v.value: f"img-{v.value}:1" for v in Vendor},
        "resources": {
            "cpu": "4",
            "memory": "8Gi",
            "accelerators": {"count": 2, "anyOf": [{"flavor": model.key}]},
        },
        "template": {
            "spec": {
                "containers": [
                    {"name": "train", "env": [{"name": "MODE", "value": "x"}]},
                    {"name": "log", "image": "fluent:1"},
                ]
            }
        },
    }


@pytest.mark.parametrize("vendor", sorted(FIRST), ids=str)
def test_each_vendor_renders_what_its_catalog_entry_says(vendor: Vendor) -> None:
    model = FIRST[vendor]
    placed = assignment(CATALOG, [_task(model)], {"train": model.key}, gang=False)
    pod = render_pod(render(placed, "ns", CATALOG)[0], owner_reference("j", 1, "u"))
    train, log = pod["spec"]["containers"]
    assert train["image"] == f"img-{vendor.value}:1" and log["image"] == "fluent:1"
    wanted = {"cpu": "4000m", "memory": "8192Mi", model.resource: "2"}
    assert train["resources"] == {"requests": wanted, "limits": wanted}
    assert "resources" not in log  # devices only on the task's container
    assert pod["spec"].get("tolerations", []) == [
        {"key": key, "operator": "Exists", "effect": effect} for key, effect in model.tolerations
    ]
    visible = {
        a.env: f"metadata.annotations['{a.annotation}']"
        for a in model.allocation
        if a.kind == "visible-env"
    }
    from_bind = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in train["env"]
        if "fieldRef" in e.get("valueFrom", {})
    }
    assert from_bind == visible
    values = {e["name"]: e.get("value") for e in train["env"]}
    assert (values["LOCAL_WORLD_SIZE"], values["MODE"]) == ("2", "x")
    assert pod["metadata"]["annotations"][ann.FLAVOR] == model.key


def test_every_vendor_of_the_catalog_is_covered() -> None:
    assert set(FIRST) == {m.vendor for m in CATALOG.models.values()}
