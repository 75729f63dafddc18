"""From discovered devices to the node's `suanpan.io/accelerator.*` labels (pure)."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

from cluster_agents.discovery.devices import DiscoveredDevice
from federation.catalog import labels as L
from federation.catalog.index import Catalog

log = logging.getLogger(__name__)


def label_value(text: str) -> str:
    """`text` made a valid label value: other characters become '-', ends are alphanumeric."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[: L.MAX_VALUE_LENGTH]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


def model_name(catalog: Catalog, device: DiscoveredDevice) -> str:
    """The catalog model name of a device, or its product name made label-safe if unknown."""
    model = catalog.identify_product(device.vendor, device.model)
    return model.model if model else label_value(device.model)


def compute_labels(devices: Sequence[DiscoveredDevice], catalog: Catalog) -> dict[str, str]:
    """The discovery labels describing a node's devices; {} when it has none.

    Labels hold one model: on a node with several, the one with the most healthy devices
    (then the most devices) is described. `count` and `memory-mib` cover healthy devices
    (`memory-mib` is the smallest); topology groups are written when the tool reported a
    group for every device of the model and the encoding fits a label value.
    """
    kinds: dict[tuple[str, str], list[DiscoveredDevice]] = defaultdict(list)
    for device in devices:
        kinds[(device.vendor.value, model_name(catalog, device))].append(device)
    if not kinds:
        return {}
    ranked = sorted(
        kinds.items(), key=lambda kv: (-sum(d.healthy for d in kv[1]), -len(kv[1]), kv[0])
    )
    if len(ranked) > 1:
        log.warning("several accelerator models on this node, labelling %s/%s", *ranked[0][0])
    (vendor, model), chosen = ranked[0]
    healthy = [d for d in chosen if d.healthy]
    labels = {L.VENDOR: vendor, L.MODEL: model, L.COUNT: str(len(healthy))}
    if healthy:
        labels[L.MEMORY_MIB] = str(min(d.memory_mib for d in healthy))
    if chosen and all(d.group is not None for d in chosen):
        groups: dict[int | None, list[int]] = defaultdict(list)
        for d in chosen:
            groups[d.group].append(d.index)
        encoded = L.encode_groups(list(groups.values()))
        if len(encoded) <= L.MAX_VALUE_LENGTH:
            labels[L.TOPOLOGY_GROUPS] = encoded
    return labels


def labels_patch(current: Mapping[str, str], desired: Mapping[str, str]) -> dict[str, str | None]:
    """The label patch taking a node's discovery labels from `current` to `desired`.

    Only discovery keys are touched: changed ones are set, ones no longer wanted become None
    (removed by a merge patch). Empty when nothing changes.
    """
    patch: dict[str, str | None] = {}
    for key in L.ALL:
        if key in desired and current.get(key) != desired[key]:
            patch[key] = desired[key]
        elif key not in desired and key in current:
            patch[key] = None
    return patch
