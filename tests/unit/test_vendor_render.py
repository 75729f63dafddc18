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
    runtime = model.runtime
    assert values.get("SUANPAN_COLLECTIVE") == (runtime.collective or None)
    assert values.get("SUANPAN_DIST_BACKEND") == (runtime.torch_backend or None)
    if runtime.framework_devices and runtime.framework_devices not in visible:
        assert values[runtime.framework_devices] == "0,1"  # the two bound devices, as seen inside

    assert pod["metadata"]["annotations"][ann.FLAVOR] == model.key


def test_every_vendor_of_the_catalog_is_covered() -> None:
    assert set(FIRST) == {m.vendor for m in CATALOG.models.values()}


RUNTIME = {  # what docs/catalog.md's runtime table says, per vendor
    Vendor.NVIDIA: ("NCCL", "nccl", {"CUDA_VISIBLE_DEVICES": "0,1"}),
    Vendor.HUAWEI: ("HCCL", "hccl", {"ASCEND_RT_VISIBLE_DEVICES": "0,1"}),
    Vendor.CAMBRICON: ("CNCL", "cncl", {}),
    Vendor.HYGON: ("RCCL", "nccl", {"HIP_VISIBLE_DEVICES": "0,1"}),
    Vendor.KUNLUNXIN: ("BKCL", "xccl", {}),
    Vendor.ILUVATAR: ("IXCCL", "nccl", {}),
    Vendor.MTHREADS: ("MCCL", "mccl", {"MUSA_VISIBLE_DEVICES": "0,1"}),
    Vendor.METAX: ("MCCL", "nccl", {"CUDA_VISIBLE_DEVICES": "0,1"}),
    Vendor.ENFLAME: ("ECCL", "eccl", {"TOPS_VISIBLE_DEVICES": "0,1"}),
    Vendor.BIREN: ("BCCL", "bccl", {}),
}
DEVICE_VARS = {v for _, _, env in RUNTIME.values() for v in env}


@pytest.mark.parametrize("vendor", sorted(FIRST), ids=str)
def test_each_vendor_gets_its_runtime_variables(vendor: Vendor) -> None:
    model = FIRST[vendor]
    placed = assignment(CATALOG, [_task(model)], {"train": model.key}, gang=False)
    for spec in render(placed, "ns", CATALOG):
        pod = render_pod(spec, owner_reference("j", 1, "u"))
        for container in pod["spec"]["containers"]:  # the sidecar too: it may use the devices
            values = {e["name"]: e.get("value") for e in container["env"]}
            collective, backend, devices = RUNTIME[vendor]
            assert (values["SUANPAN_COLLECTIVE"], values["SUANPAN_DIST_BACKEND"]) == (
                collective,
                backend,
            )
            assert {k: v for k, v in values.items() if k in DEVICE_VARS and v} == devices
