"""Turn a Kubernetes node's labels, annotations and extended resources into accelerator inventory.

Pure functions over plain mappings, shared by the cluster agent and the simulator.

Rules, in order:

1. Each extended resource in `allocatable` is looked up among the catalog's whole-device
   resources (`AcceleratorModel.resources`), then among its sharing count resources
   (`SharingRule.share_resource`, e.g. HAMi's "iluvatar.ai/BI-V100-vgpu"). Sharing memory/core
   resources ("nvidia.com/gpumem") are not device counts and are skipped.
2. A resource used by one model names it. A resource shared by several ("nvidia.com/gpu",
   "huawei.com/Ascend910", "cambricon.com/mlu") is resolved from the node's labels: first our
   discovery labels (`federation.catalog.labels`), then the vendor's product labels
   (`product_labels` matched against `product_names`), then `selector`. Still ambiguous, or a
   resource of an accelerator vendor the catalog does not know ("nvidia.com/mig-1g.10gb"),
   gives an `UnrecognizedResource` instead of vanishing.
3. HAMi split counts: a sharing count resource, or a whole resource that is also the model's
   `share_resource` on a node HAMi's plugin registered ("hami.io/node-nvidia-register":
   nvidia.com/gpu = physical x deviceSplitCount), advertises more than the physical devices.
   The physical count is then our discovery count label when it names the model, else the
   advertised count // `max_shares` (when set), else the advertised count.
4. One entry per model: whole resources beat sharing ones, the model's main resource beats its
   `extra_resources`.
5. Memory per device: discovery label, then the model's `memory_label`, then the catalog.
   Topology: `AcceleratorModel.topology_for(labels, count)`. Interconnect groups: the discovery
   topology-groups label when it names the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from federation.catalog import labels as discovery
from federation.catalog.index import Catalog
from federation.catalog.quantity import parse_count
from federation.catalog.types import AcceleratorModel, TopologyRule

# Accelerator vendors outside the catalog whose resources still deserve a report.
OTHER_ACCELERATOR_DOMAINS = (
    "amd.com",
    "aws.amazon.com",
    "intel.com",
    "habana.ai",
    "vastaitech.com",
)


@dataclass(frozen=True, slots=True)
class ResolvedDevices:
    """`count` physical devices of `model` on one node."""

    model: AcceleratorModel
    count: int
    memory_mib: int  # per device
    topology: TopologyRule
    resource: str = ""  # the extended resource the count came from
    groups: tuple[tuple[int, ...], ...] = ()  # interconnect groups the node discovery reported


@dataclass(frozen=True, slots=True)
class UnrecognizedResource:
    """An accelerator-looking extended resource the catalog cannot attribute to one model."""

    resource: str
    count: int
    reason: str


def resolve_node(
    catalog: Catalog,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    allocatable: Mapping[str, str],
) -> list[ResolvedDevices | UnrecognizedResource]:
    """The accelerators one node offers, per model, plus what could not be attributed."""
    best: dict[str, tuple[tuple[bool, bool], ResolvedDevices]] = {}
    unrecognized: list[UnrecognizedResource] = []
    for name, raw in sorted(allocatable.items()):
        whole, shares = catalog.resource_users(name)
        candidates = whole or shares
        if not candidates:
            if _looks_like_accelerator(catalog, name):
                unrecognized.append(_unrecognized(name, raw, "no catalog model uses it"))
            continue
        try:
            count = parse_count(raw)
        except ValueError:
            unrecognized.append(UnrecognizedResource(name, 0, f"bad allocatable {raw!r}"))
            continue
        if count == 0:
            continue
        model = _pick(candidates, labels)
        if model is None:
            keys = ", ".join(m.key for m in candidates)
            reason = f"the node labels name none of the models using it ({keys})"
            unrecognized.append(UnrecognizedResource(name, count, reason))
            continue
        split = not whole or (name == model.sharing.share_resource and _hami(model, annotations))
        devices = _resolved(
            model, name, _physical(model, count, labels) if split else count, labels
        )
        rank = (not whole, name != model.resource)
        if model.key not in best or rank < best[model.key][0]:
            best[model.key] = (rank, devices)
    return [devices for _, devices in best.values()] + unrecognized


def pod_device_usage(
    catalog: Catalog,
    container_requests: Sequence[Mapping[str, str]],
    init_container_requests: Sequence[Mapping[str, str]] = (),
) -> dict[str, int]:
    """Devices a pod asks for, keyed by model key when the resource names one model, else by
    resource name ("nvidia.com/gpu", or an unknown accelerator resource).

    Counts add up over app containers; init containers run one at a time, so the pod needs the
    larger of that sum and the biggest init container (the Kubernetes effective request).
    Sharing memory/core resources are not device counts and are left out. Raises ValueError
    for a count that is not a whole number ("500m").
    """
    total: dict[str, int] = {}
    for requests in container_requests:
        for key, count in _usage(catalog, requests).items():
            total[key] = total.get(key, 0) + count
    for requests in init_container_requests:
        for key, count in _usage(catalog, requests).items():
            total[key] = max(total.get(key, 0), count)
    return total


def _usage(catalog: Catalog, requests: Mapping[str, str]) -> dict[str, int]:
    usage: dict[str, int] = {}
    for name, raw in requests.items():
        whole, shares = catalog.resource_users(name)
        candidates = whole or shares
        if not candidates and not _looks_like_accelerator(catalog, name):
            continue
        key = candidates[0].key if len(candidates) == 1 else name
        usage[key] = usage.get(key, 0) + parse_count(raw)
    return usage


def _looks_like_accelerator(catalog: Catalog, name: str) -> bool:
    """A resource of an accelerator vendor's domain that is no sharing memory/core resource."""
    known = catalog.managed_resources()
    if "/" not in name or name in known:
        return False
    domain = name.split("/", 1)[0]
    domains = {r.split("/", 1)[0] for r in known} | set(OTHER_ACCELERATOR_DOMAINS)
    return any(domain == d or domain.endswith("." + d) for d in domains)


def _unrecognized(name: str, raw: str, reason: str) -> UnrecognizedResource:
    try:
        count = parse_count(raw)
    except ValueError:
        count = 0
    return UnrecognizedResource(name, count, reason)


def _discovered(labels: Mapping[str, str], model: AcceleratorModel) -> bool:
    """Whether the node discovery labels describe `model`."""
    return (
        labels.get(discovery.VENDOR) == model.vendor.value
        and labels.get(discovery.MODEL) == model.model
    )


def _pick(
    candidates: Sequence[AcceleratorModel], labels: Mapping[str, str]
) -> AcceleratorModel | None:
    if len(candidates) == 1:
        return candidates[0]
    for model in candidates:
        if _discovered(labels, model):
            return model
    by_product = [
        m
        for m in candidates
        if any(key in labels and m.matches_product(labels[key]) for key in m.product_labels)
    ]
    if len(by_product) == 1:
        return by_product[0]
    by_selector = [m for m in candidates if m.selector.matches(labels)]
    return by_selector[0] if len(by_selector) == 1 else None


def _hami(model: AcceleratorModel, annotations: Mapping[str, str]) -> bool:
    """Whether HAMi's device plugin of the model's vendor registered this node."""
    return f"hami.io/node-{model.vendor.value}-register" in annotations


def _label_int(labels: Mapping[str, str], key: str) -> int | None:
    try:
        return parse_count(labels[key]) if key in labels else None
    except ValueError:
        return None


def _physical(model: AcceleratorModel, advertised: int, labels: Mapping[str, str]) -> int:
    counted = _label_int(labels, discovery.COUNT) if _discovered(labels, model) else None
    if counted is not None:
        return counted
    split = model.sharing.max_shares
    return advertised // split if split else advertised


def _resolved(
    model: AcceleratorModel, resource: str, count: int, labels: Mapping[str, str]
) -> ResolvedDevices:
    found = _discovered(labels, model)
    memory = (_label_int(labels, discovery.MEMORY_MIB) if found else None) or (
        _label_int(labels, model.memory_label) if model.memory_label else None
    )
    groups: tuple[tuple[int, ...], ...] = ()
    if found and labels.get(discovery.TOPOLOGY_GROUPS):
        try:
            groups = discovery.decode_groups(labels[discovery.TOPOLOGY_GROUPS])
        except ValueError:
            groups = ()
    return ResolvedDevices(
        model=model,
        count=count,
        memory_mib=memory or model.memory_mib,
        topology=model.topology_for(labels, count),
        resource=resource,
        groups=groups,
    )
