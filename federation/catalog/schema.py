"""Strict shape checks for catalog and override files.

Each checker takes a raw YAML value and the path that names it ("catalog.yaml:
models['nvidia/A100-80GB'].memory_mib") and returns the cleaned value or raises `CatalogError`
naming that path, what was expected and what was found.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from federation.catalog.types import RANK_TABLE_FORMATS, Vendor


class CatalogError(ValueError):
    """A catalog or override file is invalid; the message names the file, entry and field."""


Checker = Callable[[object, str], Any]

_DNS = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
RESOURCE = re.compile(rf"^{_DNS}/{_NAME}$")  # extended resource: domain/name
LABEL_KEY = re.compile(rf"^({_DNS}/)?{_NAME}$")  # label or annotation key
LABEL_VALUE = re.compile(rf"^({_NAME})?$")
MODEL_NAME = re.compile(rf"^{_NAME}$")  # usable as a label value
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SPILLS = ("any", "whole_groups", "even_split")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
ALLOCATION_KINDS = ("hami", "mindcluster", "visible-env")


def _found(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _at(where: str) -> str:
    return where.rstrip(":")


def fail(where: str, expected: str, value: object) -> CatalogError:
    """The error for `value` at `where` not being `expected`.

    A path is "<file>:" for a whole file, then "<file>: models['nvidia/A10'].memory_mib".
    """
    return CatalogError(f"{_at(where)}: expected {expected}, got {_found(value)}")


def integer(minimum: int) -> Checker:
    """An int (not a bool) of at least `minimum`."""

    def check(value: object, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise fail(where, f"an integer >= {minimum}", value)
        return value

    return check


def number(value: object, where: str) -> float:
    """A positive int or float."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise fail(where, "a number > 0", value)
    return float(value)


def reading(value: object, where: str) -> float:
    """Any int or float (a metric's value)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(where, "a number", value)
    return float(value)


def boolean(value: object, where: str) -> bool:
    """true or false."""
    if not isinstance(value, bool):
        raise fail(where, "true or false", value)
    return value


def text(pattern: re.Pattern[str], what: str) -> Checker:
    """A string matching `pattern`, described to the user as `what`."""

    def check(value: object, where: str) -> str:
        if not isinstance(value, str) or not pattern.match(value):
            raise fail(where, what, value)
        return value

    return check


def choice(*options: object) -> Checker:
    """One of `options`."""

    def check(value: object, where: str) -> object:
        if value not in options or isinstance(value, bool):
            raise fail(where, "one of " + ", ".join(map(repr, options)), value)
        return value

    return check


def list_of(item: Checker) -> Checker:
    """A list whose items each pass `item`; returns a tuple."""

    def check(value: object, where: str) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise fail(where, "a list", value)
        return tuple(item(v, f"{where}[{i}]") for i, v in enumerate(value))

    return check


def mapping(key: Checker, item: Checker) -> Checker:
    """A mapping whose keys pass `key` and values pass `item`; returns a dict."""

    def check(value: object, where: str) -> dict[Any, Any]:
        if not isinstance(value, Mapping):
            raise fail(where, "a mapping", value)
        return {key(k, f"{where} key"): item(v, f"{where}[{k!r}]") for k, v in value.items()}

    return check


def record(fields: Mapping[str, Checker], required: tuple[str, ...] = ()) -> Checker:
    """A mapping with only the named fields (each checked), `required` ones present."""

    def check(value: object, where: str) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise fail(where, "a mapping", value)
        for name in value:
            if name not in fields:
                known = ", ".join(sorted(fields))
                raise CatalogError(f"{_at(where)}: unknown field {name!r} (known fields: {known})")
        for name in required:
            if name not in value:
                raise CatalogError(f"{_at(where)}: missing required field {name!r}")
        sep = " " if where.endswith(":") else "."
        return {name: fields[name](v, f"{where}{sep}{name}") for name, v in value.items()}

    return check


def _vendor(value: object, where: str) -> str:
    vendors = [v.value for v in Vendor]
    if value not in vendors:
        raise fail(where, "a vendor (" + ", ".join(vendors) + ")", value)
    return str(value)


def model_key(value: object, where: str) -> str:
    """A "<vendor>/<model>" key with a known vendor and a label-safe model name."""
    if not isinstance(value, str) or "/" not in value:
        raise fail(where, "'<vendor>/<model>'", value)
    vendor, name = value.split("/", 1)
    _vendor(vendor, where)
    if not MODEL_NAME.match(name) or len(name) > 63:
        raise fail(where, "a model name of letters, digits, '-', '_', '.' (<= 63)", name)
    return value


_resource = text(RESOURCE, "an extended resource name '<domain>/<name>'")
_label_key = text(LABEL_KEY, "a label or annotation key")
_labels = mapping(_label_key, text(LABEL_VALUE, "a label value"))
TOPOLOGY = record(
    {
        "group_size": integer(0),
        "allowed_counts": list_of(integer(1)),
        "spill": choice(*SPILLS),
    }
)
SHARING = record(
    {
        "enabled": boolean,
        "memory_unit_mib": integer(1),
        "max_shares": integer(0),
        "share_resource": _resource,
        "memory_resource": _resource,
        "core_resource": _resource,
        "core_units": integer(1),
    }
)
_VARIANT = record(
    {"match_labels": _labels, "min_devices": integer(0), "topology": TOPOLOGY},
    required=("topology",),
)


def _templated(check: Checker) -> Checker:
    """`check` on the value with its `{model}` placeholder filled in (the loader fills it)."""

    def checked(value: object, where: str) -> object:
        if isinstance(value, str):
            check(value.replace("{model}", "M"), where)
        else:
            check(value, where)
        return value

    return checked


def _id_pattern(value: object, where: str) -> str:
    if not isinstance(value, str) or "{index}" not in value:
        raise fail(where, "a device id pattern containing '{index}'", value)
    return value


ALLOCATION = record(
    {
        "kind": choice(*ALLOCATION_KINDS),
        "annotation": _templated(_label_key),
        "device_type": _templated(text(re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]*$"), "a name")),
        "register": _templated(_label_key),
        "device_id": _templated(_id_pattern),
        "env": text(ENV_NAME, "an environment variable name"),
        "resources": list_of(_resource),
        "source": text(re.compile(r"^\S.*$"), "a non-empty text"),
    },
    required=("kind", "annotation"),
)
RANK_TABLE = record(
    {
        "format": choice(*RANK_TABLE_FORMATS),
        "env": text(ENV_NAME, "an environment variable name"),
        "path": text(
            re.compile(r"^/(?:[A-Za-z0-9._-]+/)+[A-Za-z0-9._-]+$"), "an absolute file path"
        ),
        "device_annotation": _label_key,
    },
    required=("format", "env", "path"),
)
RUNTIME = record(
    {
        "collective": text(re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_ ]*$"), "a library name"),
        "torch_backend": text(re.compile(r"^[a-z0-9_]+$"), "a torch.distributed backend name"),
        "visible_devices": text(ENV_NAME, "an environment variable name"),
        "framework_devices": text(ENV_NAME, "an environment variable name"),
        "env": mapping(
            text(ENV_NAME, "an environment variable name"), text(re.compile(r"^.*$"), "a value")
        ),
        "rank_table": RANK_TABLE,
    }
)
_METRIC_NAME = text(re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"), "a Prometheus metric name")
_LABEL_NAME = text(re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$"), "a Prometheus label name")
_SERIES = record({"metric": _METRIC_NAME, "scale": number}, required=("metric",))
TELEMETRY = record(
    {
        "exporter": text(re.compile(r"^\S.*$"), "a non-empty text"),
        "device_label": _LABEL_NAME,
        "uuid_label": _LABEL_NAME,
        "node_label": _LABEL_NAME,
        "utilization": _SERIES,
        "memory_used": _SERIES,
        "memory_total": _SERIES,
        "memory_free": _SERIES,
        "temperature": _SERIES,
        "health": _SERIES,
        "fatal": list_of(reading),
        "source": text(re.compile(r"^\S.*$"), "a non-empty text"),
    },
    required=("exporter", "device_label", "utilization"),
)
_TOLERATION = record({"key": _label_key, "effect": choice(*EFFECTS)}, required=("key", "effect"))
_COMMON: dict[str, Checker] = {
    "resource": _resource,
    "extra_resources": list_of(_resource),
    "selector": _labels,
    "product_labels": list_of(_label_key),
    "product_names": list_of(text(re.compile(r"^\S+$"), "a product-name pattern")),
    "memory_label": _label_key,
    "topology": TOPOLOGY,
    "topology_variants": list_of(_VARIANT),
    "sharing": SHARING,
    "allocation": list_of(ALLOCATION),
    "tolerations": list_of(_TOLERATION),
    "runtime": RUNTIME,
    "telemetry": TELEMETRY,
}
VENDOR_DEFAULTS = record(_COMMON)
MODEL = record(
    {
        **_COMMON,
        "memory_mib": integer(1),
        "fp16_tflops": number,
        "speed": number,
        "aliases": list_of(text(re.compile(r"^\S.*$"), "a non-empty alias")),
    }
)
MODEL_REQUIRED = ("memory_mib", "fp16_tflops", "resource")
FILE = record(
    {
        "version": choice(1),
        "reference_fp16_tflops": number,
        "vendors": mapping(_vendor, VENDOR_DEFAULTS),
        "models": mapping(model_key, MODEL),
    }
)
