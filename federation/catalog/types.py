"""Vendor-neutral model of accelerators: the types every layer shares.

These are plain frozen values with no I/O, so the pure scheduling core may import them.
The loader (`federation.catalog.loader`) builds them from the catalog data file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Literal


class Vendor(StrEnum):
    """Accelerator vendors the catalog knows."""

    NVIDIA = "nvidia"
    HUAWEI = "huawei"  # Ascend NPU
    CAMBRICON = "cambricon"  # MLU
    HYGON = "hygon"  # DCU
    KUNLUNXIN = "kunlunxin"  # XPU
    ILUVATAR = "iluvatar"  # CoreX GPU
    MTHREADS = "mthreads"  # Moore Threads GPU
    METAX = "metax"  # MetaX GPU
    ENFLAME = "enflame"  # GCU
    BIREN = "biren"  # GPU


Spill = Literal["any", "whole_groups", "even_split"]


@dataclass(frozen=True, slots=True)
class TopologyRule:
    """Which device counts one pod may take on one node and how they spread over groups.

    A node's devices of one model are numbered 0..n-1 and split into consecutive interconnect
    groups of `group_size` devices (an HCCS ring, an XPU NUMA wing, a 910C two-die module).
    `group_size == 0` means the node's devices form a single group.

    - `allowed_counts`: the device counts a pod may request (empty: any count up to the node's).
    - A request of at most `group_size` devices must sit inside one group unless `spill == "any"`
      (then one group is only preferred).
    - A larger request spills over groups as `spill` says: `"whole_groups"` takes whole free
      groups only (count a multiple of `group_size`); `"even_split"` takes the fewest groups k
      with count % k == 0 and count / k <= group_size, the same number of devices in each.
    """

    group_size: int = 0
    allowed_counts: frozenset[int] = frozenset()
    spill: Spill = "any"


@dataclass(frozen=True, slots=True)
class SharingRule:
    """Whether and how one physical device may be shared by several pods.

    Shares are expressed in milli-devices (1..999 of the compute) plus a memory amount.
    `memory_unit_mib` rounds memory requests up (vNPU templates, 256 MiB units, ...);
    `max_shares` caps the pods on one device (0: no cap); sharing is only ever for a request of
    one device (no vendor supports sharing multi-device requests but NVIDIA via HAMi, and even
    there the scheduler allocates whole devices for count > 1).
    """

    enabled: bool = False
    memory_unit_mib: int = 1
    max_shares: int = 0
    share_resource: str = ""  # resource name of a shared slice, e.g. "nvidia.com/gpu" with HAMi
    memory_resource: str = ""  # e.g. "nvidia.com/gpumem" (MiB), "huawei.com/Ascend910B3-memory"
    core_resource: str = ""  # e.g. "nvidia.com/gpucores" (percent)
    core_units: int = 100  # units of `core_resource` in one whole device (percent: 100)


AllocationKind = Literal["hami", "mindcluster", "visible-env"]


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    """How the vendor's device plugin is told which devices the scheduler chose for a pod.

    The extender writes `annotation` at bind, in the Binding that sets the node. Its value, by
    `kind`:

    - `hami`: HAMi's pod protocol, per container (init containers first) the chosen devices as
      `<id>,<device_type>,<memory MiB>,<cores %>:` each, containers ended by `;`, plus
      `hami.io/vgpu-node`, `hami.io/vgpu-time`, `hami.io/bind-time` and
      `hami.io/bind-phase: allocating`, which the plugin's Allocate looks for;
    - `mindcluster`: MindCluster's `<device_type>-<n>,...` (e.g. `Ascend910-0,Ascend910-1`),
      plus `predicate-time`;
    - `visible-env`: the ids joined by ",", which the agent's pod passes to the container as
      `env` through a `fieldRef` on the annotation (resolved by the kubelet at start, after bind).

    Device ids come from the node annotation `register` (HAMi's register JSON or its legacy text
    form; MindCluster's list of device names) by position, else from `device_id` with `{node}`,
    `{type}` and `{index}` filled in. The record applies to a node whose device count came from
    one of `resources` (empty: any).
    """

    kind: AllocationKind
    annotation: str
    device_type: str = ""
    register: str = ""
    device_id: str = "{index}"
    env: str = ""
    resources: tuple[str, ...] = ()
    source: str = ""  # where the vendor documents or implements the protocol


RankTableFormat = Literal["hccl-1.0"]
RANK_TABLE_FORMATS: tuple[RankTableFormat, ...] = ("hccl-1.0",)


@dataclass(frozen=True, slots=True)
class RankTableProfile:
    """A collective library that reads its group from a file (Ascend HCCL's rank table): the
    file's `format`, the variable naming it (`env`), where it is mounted (`path`), and the pod
    annotation in which the vendor's device plugin gives the devices' network addresses
    (`device_annotation`, "" if none; MindCluster writes it when it allocates the chips)."""

    format: RankTableFormat
    env: str
    path: str
    device_annotation: str = ""


@dataclass(frozen=True, slots=True)
class RuntimeProfile:
    """What a vendor's software stack reads inside the container (docs/catalog.md, sources).

    - `collective`: the collective communication library (NCCL, HCCL, CNCL, BKCL, ...);
    - `torch_backend`: its `torch.distributed` backend name, given as `SUANPAN_DIST_BACKEND`;
    - `visible_devices`: the variable the device plugin or container runtime sets to the bound
      devices (documentation: the plugin owns it, or `allocation` passes it for `visible-env`);
    - `framework_devices`: the variable the vendor's framework runtime selects devices by; the
      container sees only its bound devices, numbered from 0, so the renderer sets it to
      `0..count-1` (unless the allocation already passes that variable);
    - `env`: fixed variables every container on this vendor gets;
    - `rank_table`: the group file the collective library needs, if any (`RankTableProfile`).
    """

    collective: str = ""
    torch_backend: str = ""
    visible_devices: str = ""
    framework_devices: str = ""
    env: tuple[tuple[str, str], ...] = ()
    rank_table: RankTableProfile | None = None


@dataclass(frozen=True, slots=True)
class TelemetryMetric:
    """One series of a vendor's exporter: its metric name and the factor that turns its value
    into Suanpan's unit (percent, MiB, degrees Celsius)."""

    metric: str
    scale: float = 1.0


@dataclass(frozen=True, slots=True)
class TelemetryProfile:
    """What a vendor's Prometheus exporter publishes per device (docs/catalog.md, sources).

    Series are matched by metric name; `device_label` holds the device's index on its node (the
    index the device plugin and `suanpan.io/devices` count by), `uuid_label` its id and
    `node_label` the node, where the exporter says it (otherwise the node of the scraped
    endpoint). A device is in fatal error while its `health` series reads one of `fatal`.
    """

    exporter: str
    device_label: str
    utilization: TelemetryMetric  # percent
    uuid_label: str = ""
    node_label: str = ""
    memory_used: TelemetryMetric | None = None  # MiB
    memory_total: TelemetryMetric | None = None  # MiB
    memory_free: TelemetryMetric | None = None  # MiB; total = used + free when no total
    temperature: TelemetryMetric | None = None  # degrees Celsius
    health: TelemetryMetric | None = None
    fatal: frozenset[float] = frozenset()
    source: str = ""


@dataclass(frozen=True, slots=True)
class NodeSelectorRule:
    """How a node's labels tell that it carries this model (all `match_labels` must hold)."""

    match_labels: tuple[tuple[str, str], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when the rule names at least one label and every one of them holds."""
        return bool(self.match_labels) and all(labels.get(k) == v for k, v in self.match_labels)


@dataclass(frozen=True, slots=True)
class TopologyVariant:
    """A node-specific topology of a model, e.g. Ascend 910B in a 16-NPU chassis.

    It applies to a node whose labels hold all `match_labels` and that has at least
    `min_devices` devices of the model; the first variant that applies wins.
    """

    topology: TopologyRule
    match_labels: tuple[tuple[str, str], ...] = ()
    min_devices: int = 0

    def applies(self, labels: Mapping[str, str], count: int) -> bool:
        """Whether this variant describes a node with these labels and device count."""
        return count >= self.min_devices and all(labels.get(k) == v for k, v in self.match_labels)


@dataclass(frozen=True, slots=True)
class AcceleratorModel:
    """One accelerator model (a *flavor* of the pool), e.g. `huawei/Ascend910B3`."""

    vendor: Vendor
    model: str  # vendor's model name, e.g. "H100-80GB", "Ascend910B3", "MLU370-X8"
    memory_mib: int
    fp16_tflops: float  # dense FP16/BF16
    speed: float  # normalized compute units per device (operator-tunable; 1.0 = reference)
    resource: str  # extended resource counting whole devices, e.g. "nvidia.com/gpu"
    selector: NodeSelectorRule = NodeSelectorRule()
    topology: TopologyRule = TopologyRule()
    sharing: SharingRule = SharingRule()
    # How the device plugin learns the chosen devices; the first record for the node's
    # resource applies (see `allocation_for`).
    allocation: tuple[DeviceAllocation, ...] = ()
    tolerations: tuple[
        tuple[str, str], ...
    ] = ()  # (key, effect) the vendor's nodes are tainted with
    runtime: RuntimeProfile = RuntimeProfile()  # what the vendor's stack reads in the container
    telemetry: TelemetryProfile | None = None  # what the vendor's exporter publishes
    aliases: tuple[str, ...] = field(default=())  # other spellings users may request
    # Other extended resources that count whole devices of this model (one may cover several
    # models, e.g. MindCluster's "huawei.com/Ascend910"; then node labels pick the model).
    extra_resources: tuple[str, ...] = ()
    # Node labels whose value names the product (e.g. "nvidia.com/gpu.product") and the
    # product-name patterns (shell globs over `normalize_product` form) that mean this model;
    # the node discovery matches the vendor tools' product names against the same patterns.
    product_labels: tuple[str, ...] = ()
    product_names: tuple[str, ...] = ()
    memory_label: str = ""  # node label giving MiB per device, e.g. "nvidia.com/gpu.memory"
    topology_variants: tuple[TopologyVariant, ...] = ()  # node-specific topologies, first wins

    @property
    def key(self) -> str:
        """Stable identifier of the flavor: `<vendor>/<model>`."""
        return f"{self.vendor.value}/{self.model}"

    @property
    def resources(self) -> tuple[str, ...]:
        """Every extended resource counting whole devices of this model, main one first."""
        return (self.resource, *self.extra_resources)

    def allocation_for(self, resource: str) -> DeviceAllocation | None:
        """The allocation protocol on a node whose devices of this model count as `resource`."""
        return next(
            (a for a in self.allocation if not a.resources or resource in a.resources), None
        )

    def matches_product(self, product: str) -> bool:
        """Whether a product name (from a tool or a node label) designates this model."""
        name = normalize_product(product)
        own = {normalize_product(n) for n in (self.model, *self.aliases)}
        return name in own or any(fnmatchcase(name, p) for p in self.product_names)

    def topology_for(self, labels: Mapping[str, str], count: int) -> TopologyRule:
        """The topology of this model on a node with these labels and `count` devices."""
        for variant in self.topology_variants:
            if variant.applies(labels, count):
                return variant.topology
        return self.topology


def normalize_product(name: str) -> str:
    """Canonical product spelling: lower case, every run of other characters one '-'.

    "NVIDIA A100-SXM4-80GB" (nvidia-smi) and "NVIDIA-A100-SXM4-80GB" (feature-discovery label)
    both become "nvidia-a100-sxm4-80gb".
    """
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
