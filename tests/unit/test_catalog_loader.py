"""Loading, checking and overriding the catalog file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from federation.catalog import (
    OVERRIDES_ENV,
    CatalogError,
    SharingRule,
    TopologyRule,
    Vendor,
    load_catalog,
)

SMALL = """
version: 1
reference_fp16_tflops: 100
vendors:
  nvidia:
    resource: nvidia.com/gpu
    sharing: {enabled: true, max_shares: 10, share_resource: nvidia.com/gpu}
models:
  nvidia/X1:
    memory_mib: 1024
    fp16_tflops: 50
"""


def write(tmp_path: Path, text: str, name: str = "catalog.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_bundled_catalog_loads() -> None:
    catalog = load_catalog()
    assert catalog.get("nvidia/A100-80GB") is not None
    assert catalog.speed("nvidia/A100-80GB") == 1.0
    assert {m.vendor for m in catalog.models.values()} == set(Vendor)


def test_small_catalog_inherits_vendor_defaults_and_derives_speed(tmp_path: Path) -> None:
    model = load_catalog(write(tmp_path, SMALL)).models["nvidia/X1"]
    assert model.resource == "nvidia.com/gpu"
    assert model.sharing == SharingRule(
        enabled=True, max_shares=10, share_resource="nvidia.com/gpu"
    )
    assert model.speed == 0.5  # 50 / reference 100
    assert model.topology == TopologyRule()


def test_override_changes_speed_and_adds_model(tmp_path: Path) -> None:
    base = write(tmp_path, SMALL)
    override = write(
        tmp_path,
        """
        models:
          nvidia/X1: {speed: 0.9}
          huawei/NewChip:
            memory_mib: 65536
            fp16_tflops: 400
            resource: huawei.com/NewChip
            topology: {group_size: 4, allowed_counts: [1, 2, 4], spill: whole_groups}
        """,
        "override.yaml",
    )
    catalog = load_catalog(base, override)
    assert catalog.speed("nvidia/X1") == 0.9
    assert catalog.models["nvidia/X1"].memory_mib == 1024  # untouched fields stay
    new = catalog.models["huawei/NewChip"]
    assert new.speed == 4.0
    assert new.topology == TopologyRule(4, frozenset({1, 2, 4}), "whole_groups")


def test_override_merges_nested_mappings_and_recomputes_derived_speed(tmp_path: Path) -> None:
    base = write(tmp_path, SMALL)
    override = write(
        tmp_path,
        """
        reference_fp16_tflops: 50
        vendors:
          nvidia: {sharing: {max_shares: 4}}
        """,
        "o.yaml",
    )
    model = load_catalog(base, override).models["nvidia/X1"]
    assert model.sharing.max_shares == 4
    assert model.sharing.share_resource == "nvidia.com/gpu"  # merged, not replaced
    assert model.speed == 1.0


def test_override_file_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    override = write(tmp_path, "models:\n  nvidia/H100-80GB: {speed: 2.5}\n", "env.yaml")
    monkeypatch.setenv(OVERRIDES_ENV, str(override))
    assert load_catalog().speed("nvidia/H100-80GB") == 2.5


def test_override_error_names_the_override_file(tmp_path: Path) -> None:
    base = write(tmp_path, SMALL)
    override = write(tmp_path, "models:\n  nvidia/X1: {speed: fast}\n", "bad-override.yaml")
    with pytest.raises(CatalogError) as err:
        load_catalog(base, override)
    assert str(err.value) == (
        f"{override}: models['nvidia/X1'].speed: expected a number > 0, got str 'fast'"
    )


def test_new_model_in_override_must_be_complete(tmp_path: Path) -> None:
    override = write(tmp_path, "models:\n  huawei/Half: {memory_mib: 1}\n", "o.yaml")
    with pytest.raises(CatalogError, match=r"o\.yaml: models\['huawei/Half'\]: missing required "):
        load_catalog(write(tmp_path, SMALL), override)


MODEL = "models:\n  nvidia/X1:\n    memory_mib: 1024\n    fp16_tflops: 50\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 1\nmodels: {}\ncolour: red\n", "catalog.yaml: unknown field 'colour' (known"),
        ("version: 2\nmodels: {}\n", "catalog.yaml: version: expected one of 1, got int 2"),
        ("models: {}\n", "catalog.yaml: missing required field 'version'"),
        ("version: 1\n", "catalog.yaml: missing required field 'models'"),
        ("- a\n- b\n", "catalog.yaml: expected a mapping, got list ['a', 'b']"),
        ("version: 1\nmodels: [1]\n", "catalog.yaml: models: expected a mapping, got list [1]"),
        (
            "version: 1\nmodels:\n  acme/X: {}\n",
            "catalog.yaml: models key: expected a vendor (nvidia, huawei",
        ),
        (
            "version: 1\nmodels:\n  X100: {}\n",
            "catalog.yaml: models key: expected '<vendor>/<model>', got str 'X100'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/bad name: {}\n",
            "catalog.yaml: models key: expected a model name of letters",
        ),
        (
            "version: 1\n" + MODEL + "    colour: red\n",
            "catalog.yaml: models['nvidia/X1']: unknown field 'colour' (known fields: aliases,",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {memory_mib: lots}\n",
            "models['nvidia/X1'].memory_mib: expected an integer >= 1, got str 'lots'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {memory_mib: true}\n",
            "models['nvidia/X1'].memory_mib: expected an integer >= 1, got bool True",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {fp16_tflops: -3}\n",
            "models['nvidia/X1'].fp16_tflops: expected a number > 0, got int -3",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {resource: gpu}\n",
            "models['nvidia/X1'].resource: expected an extended resource name '<domain>/<name>'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {topology: {spill: sometimes}}\n",
            "models['nvidia/X1'].topology.spill: expected one of 'any', 'whole_groups', "
            "'even_split', got str 'sometimes'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {topology: {allowed_counts: [1, 0]}}\n",
            "models['nvidia/X1'].topology.allowed_counts[1]: expected an integer >= 1, got int 0",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {sharing: {slices: 2}}\n",
            "models['nvidia/X1'].sharing: unknown field 'slices'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {tolerations: [{key: a}]}\n",
            "models['nvidia/X1'].tolerations[0]: missing required field 'effect'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {tolerations: [{key: a, effect: Never}]}\n",
            "models['nvidia/X1'].tolerations[0].effect: expected one of 'NoSchedule'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {topology_variants: [{min_devices: 9}]}\n",
            "models['nvidia/X1'].topology_variants[0]: missing required field 'topology'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {selector: {accelerator: [a]}}\n",
            "models['nvidia/X1'].selector['accelerator']: expected a label value, got list",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {aliases: X}\n",
            "models['nvidia/X1'].aliases: expected a list, got str 'X'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {allocation: [{kind: visible-env, "
            "annotation: a/b, env: 1BAD}]}\n",
            "models['nvidia/X1'].allocation[0].env: expected an environment variable name",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {allocation: [{kind: plugin, annotation: a/b}]}\n",
            "models['nvidia/X1'].allocation[0].kind: expected one of 'hami', 'mindcluster'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {allocation: [{kind: hami, annotation: a/b, "
            "device_id: GPU}]}\n",
            "allocation[0].device_id: expected a device id pattern containing '{index}'",
        ),
        (
            "version: 1\nmodels:\n  nvidia/X1: {memory_mib: 1, fp16_tflops: 1, resource: a.b/c, "
            "allocation: [{kind: visible-env, annotation: a/b}]}\n",
            "models['nvidia/X1'].allocation: a visible-env record needs 'env'",
        ),
        (
            "version: 1\nvendors:\n  nvidia: {memory_mib: 3}\nmodels: {}\n",
            "catalog.yaml: vendors['nvidia']: unknown field 'memory_mib'",
        ),
        (
            "version: 1\nmodels:\n  huawei/X: {memory_mib: 1, fp16_tflops: 1}\n",
            "catalog.yaml: models['huawei/X']: missing required field 'resource' "
            "(set it on the model or in vendors['huawei'])",
        ),
        (
            "version: 1\n" + MODEL + "  nvidia/X1:\n    memory_mib: 2\n",
            "catalog.yaml: line 6: duplicate key 'nvidia/X1' (first at line 3)",
        ),
        (
            "version: 1\n" + MODEL + "    memory_mib: 2\n",
            "catalog.yaml: line 6: duplicate key 'memory_mib' (first at line 4)",
        ),
        ("version: 1\nmodels: {a: [}\n", "catalog.yaml: not valid YAML"),
        (
            "version: 1\n"
            "models:\n"
            "  nvidia/X1: {memory_mib: 1, fp16_tflops: 1, resource: a.b/c}\n"
            "  nvidia/X2: {memory_mib: 1, fp16_tflops: 1, resource: a.b/c, aliases: [x1]}\n",
            "catalog.yaml: models['nvidia/X2']: name or alias 'x1' is already used by "
            "models['nvidia/X1']",
        ),
    ],
)
def test_invalid_catalog_gives_precise_error(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert message in str(err.value)
    assert str(err.value).startswith(str(path))


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"nope\.yaml: cannot read"):
        load_catalog(tmp_path / "nope.yaml")
