"""Load the accelerator catalog file, merge an operator override file, build a `Catalog`.

The bundled `catalog.yaml` is the default. An override file (argument, or the path in the
`SUANPAN_CATALOG_OVERRIDES` environment variable) has the same shape; every section is
optional. Its `vendors.<vendor>` entries merge into the vendor defaults, its `models.<key>`
entries merge field by field into existing models (mappings merge, lists replace) or add new
ones, and `reference_fp16_tflops` replaces the reference. Both files are checked strictly:
unknown keys, wrong types and duplicate keys fail with the file, entry and field named.
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import yaml

from federation.catalog import schema
from federation.catalog.index import Catalog
from federation.catalog.schema import CatalogError
from federation.catalog.types import (
    AcceleratorModel,
    DeviceAllocation,
    NodeSelectorRule,
    RankTableProfile,
    RuntimeProfile,
    SharingRule,
    TelemetryMetric,
    TelemetryProfile,
    TopologyRule,
    TopologyVariant,
    Vendor,
)

DEFAULT_PATH = Path(__file__).with_name("catalog.yaml")
OVERRIDES_ENV = "SUANPAN_CATALOG_OVERRIDES"


def load_catalog(path: Path | None = None, overrides: Path | None = None) -> Catalog:
    """Load and check the catalog at `path` (default: the bundled one), merging `overrides`.

    Without `overrides`, the file named by `$SUANPAN_CATALOG_OVERRIDES` (if set) is merged.
    Raises `CatalogError` naming the file, entry and field of the first problem found.
    """
    path = path or DEFAULT_PATH
    if overrides is None and os.environ.get(OVERRIDES_ENV):
        overrides = Path(os.environ[OVERRIDES_ENV])
    base = schema.FILE(_read(path), f"{path}:")
    for name in ("version", "models"):
        if name not in base:
            raise CatalogError(f"{path}: missing required field {name!r}")
    vendors: dict[str, dict[str, Any]] = base.get("vendors", {})
    models: dict[str, dict[str, Any]] = dict(base["models"])
    reference: float = base.get("reference_fp16_tflops", 312.0)
    origin = dict.fromkeys(models, str(path))
    if overrides is not None:
        extra = schema.FILE(_read(overrides), f"{overrides}:")
        vendors = {
            v: _merge(vendors.get(v, {}), extra.get("vendors", {}).get(v, {}))
            for v in {*vendors, *extra.get("vendors", {})}
        }
        for key, fields in extra.get("models", {}).items():
            origin.setdefault(key, str(overrides))
            models[key] = _merge(models.get(key, {}), fields)
        reference = extra.get("reference_fp16_tflops", reference)
    built = {
        key: _build(
            key,
            _merge(vendors.get(key.split("/")[0], {}), fields),
            reference,
            f"{origin[key]}: models[{key!r}]",
        )
        for key, fields in models.items()
    }
    _check_names_unique(built, origin)
    return Catalog(built, reference)


class _DuplicateKey(Exception):
    def __init__(self, line: int, key: object, first: int) -> None:
        super().__init__(f"line {line}: duplicate key {key!r} (first at line {first})")


class _StrictLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key given twice in one mapping."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Hashable, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if isinstance(key, Hashable):
            if key in seen:
                raise _DuplicateKey(line, key, seen[key])
            seen[key] = line
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except _DuplicateKey as exc:
        raise CatalogError(f"{path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from exc
    return {} if data is None else data


def _merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` over `base`: nested mappings merge, anything else (lists too) replaces."""
    merged = dict(base)
    for key, value in top.items():
        old = merged.get(key)
        both = isinstance(old, Mapping) and isinstance(value, Mapping)
        merged[key] = _merge(old, value) if both else value  # type: ignore[arg-type]
    return merged


def _topology(fields: Mapping[str, Any]) -> TopologyRule:
    return TopologyRule(
        group_size=fields.get("group_size", 0),
        allowed_counts=frozenset(fields.get("allowed_counts", ())),
        spill=fields.get("spill", "any"),
    )


def _pairs(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(labels.items())


def _build(key: str, f: Mapping[str, Any], reference: float, where: str) -> AcceleratorModel:
    missing = [name for name in schema.MODEL_REQUIRED if name not in f]
    if missing:
        vendor = key.split("/")[0]
        raise CatalogError(
            f"{where}: missing required field {missing[0]!r} "
            f"(set it on the model or in vendors[{vendor!r}])"
        )
    vendor, name = key.split("/", 1)
    return AcceleratorModel(
        vendor=Vendor(vendor),
        model=name,
        memory_mib=f["memory_mib"],
        fp16_tflops=f["fp16_tflops"],
        speed=f.get("speed", round(f["fp16_tflops"] / reference, 3)),
        resource=f["resource"],
        selector=NodeSelectorRule(_pairs(f.get("selector", {}))),
        topology=_topology(f.get("topology", {})),
        sharing=SharingRule(**f.get("sharing", {})),
        allocation=tuple(_allocation(a, name, where) for a in f.get("allocation", ())),
        tolerations=tuple((t["key"], t["effect"]) for t in f.get("tolerations", ())),
        runtime=_runtime(f.get("runtime", {})),
        telemetry=_telemetry(f["telemetry"]) if "telemetry" in f else None,
        aliases=f.get("aliases", ()),
        extra_resources=f.get("extra_resources", ()),
        product_labels=f.get("product_labels", ()),
        product_names=tuple(_normalize_glob(p) for p in f.get("product_names", ())),
        memory_label=f.get("memory_label", ""),
        topology_variants=tuple(
            TopologyVariant(
                topology=_topology(v["topology"]),
                match_labels=_pairs(v.get("match_labels", {})),
                min_devices=v.get("min_devices", 0),
            )
            for v in f.get("topology_variants", ())
        ),
    )


def _runtime(fields: Mapping[str, Any]) -> RuntimeProfile:
    table = fields.get("rank_table")
    return RuntimeProfile(
        **{
            **fields,
            "env": tuple(fields.get("env", {}).items()),
            "rank_table": RankTableProfile(**table) if table else None,
        }
    )


def _telemetry(fields: Mapping[str, Any]) -> TelemetryProfile:
    series = ("utilization", "memory_used", "memory_total", "memory_free", "temperature", "health")
    return TelemetryProfile(
        **{
            **fields,
            **{k: TelemetryMetric(**fields[k]) for k in series if k in fields},
            "fatal": frozenset(fields.get("fatal", ())),
        }
    )


def _allocation(fields: Mapping[str, Any], model: str, where: str) -> DeviceAllocation:
    """An allocation record with `{model}` filled in; a visible-env record needs an `env`."""
    filled: dict[str, Any] = {
        k: v.replace("{model}", model) if isinstance(v, str) else tuple(v)
        for k, v in fields.items()
    }
    if filled["kind"] == "visible-env" and not filled.get("env"):
        raise CatalogError(f"{where}.allocation: a visible-env record needs 'env'")
    return DeviceAllocation(**filled)


def _normalize_glob(pattern: str) -> str:
    """A product-name pattern in `normalize_product` form, keeping its '*' and '?'."""
    return re.sub(r"[^a-z0-9*?]+", "-", pattern.lower()).strip("-")


def _check_names_unique(models: Mapping[str, AcceleratorModel], origin: Mapping[str, str]) -> None:
    owner: dict[str, str] = {}
    for key, model in models.items():
        for name in {n.lower() for n in (model.model, *model.aliases)}:
            other = owner.setdefault(name, key)
            if other != key:
                raise CatalogError(
                    f"{origin[key]}: models[{key!r}]: name or alias {name!r} "
                    f"is already used by models[{other!r}]"
                )
