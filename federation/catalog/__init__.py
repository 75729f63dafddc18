"""Accelerator catalog: vendor models, their Kubernetes names and rules, node resolution."""

from federation.catalog.index import Catalog
from federation.catalog.loader import OVERRIDES_ENV, load_catalog
from federation.catalog.quantity import parse_count, parse_quantity
from federation.catalog.resolve import (
    ResolvedDevices,
    UnrecognizedResource,
    pod_device_usage,
    resolve_node,
)
from federation.catalog.schema import CatalogError
from federation.catalog.types import (
    AcceleratorModel,
    AllocationKind,
    DeviceAllocation,
    NodeSelectorRule,
    RankTableProfile,
    RuntimeProfile,
    SharingRule,
    Spill,
    TelemetryMetric,
    TelemetryProfile,
    TopologyRule,
    TopologyVariant,
    Vendor,
    normalize_product,
)

__all__ = [
    "OVERRIDES_ENV",
    "AcceleratorModel",
    "AllocationKind",
    "Catalog",
    "CatalogError",
    "DeviceAllocation",
    "NodeSelectorRule",
    "RankTableProfile",
    "ResolvedDevices",
    "RuntimeProfile",
    "SharingRule",
    "Spill",
    "TelemetryMetric",
    "TelemetryProfile",
    "TopologyRule",
    "TopologyVariant",
    "UnrecognizedResource",
    "Vendor",
    "load_catalog",
    "normalize_product",
    "parse_count",
    "parse_quantity",
    "pod_device_usage",
    "resolve_node",
]
