"""The catalog names, per vendor, how its device plugin learns the scheduler's devices."""

from __future__ import annotations

from federation.catalog import Vendor, load_catalog

CATALOG = load_catalog()


def test_every_model_names_its_allocation_protocol_with_a_source() -> None:
    for model in CATALOG.models.values():
        record = model.allocation_for(model.resource)
        assert record is not None and record.source, model.key
        assert record.kind != "visible-env" or record.env, model.key


def test_the_mechanism_per_vendor() -> None:
    kinds = {
        v: {a.kind for m in CATALOG.models.values() if m.vendor is v for a in m.allocation}
        for v in Vendor
    }
    assert kinds == {
        Vendor.NVIDIA: {"hami"},
        Vendor.HUAWEI: {"hami", "mindcluster"},
        Vendor.CAMBRICON: {"visible-env"},
        Vendor.HYGON: {"hami"},
        Vendor.KUNLUNXIN: {"visible-env"},
        Vendor.ILUVATAR: {"visible-env"},
        Vendor.MTHREADS: {"visible-env"},
        Vendor.METAX: {"hami"},
        Vendor.ENFLAME: {"visible-env"},
        Vendor.BIREN: {"hami"},
    }


def test_ascend_uses_mindcluster_on_its_shared_resource_and_hami_on_per_chip_ones() -> None:
    b3 = CATALOG.models["huawei/Ascend910B3"]
    mind = b3.allocation_for("huawei.com/Ascend910")
    hami = b3.allocation_for("huawei.com/Ascend910B3")
    assert mind is not None and mind.kind == "mindcluster"
    assert (mind.annotation, mind.device_type) == ("huawei.com/Ascend910", "Ascend910")
    assert hami is not None and hami.kind == "hami"
    assert hami.annotation == "hami.io/Ascend910B3-devices-to-allocate"  # {model} filled in
    assert hami.register == "hami.io/node-register-Ascend910B3"
    assert hami.device_type == "Ascend910B3"
