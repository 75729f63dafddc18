"""The interface between the agent and a cluster, and the neutral types that cross it.

Everything above this interface (registration, inventory sync, assignments, fencing, status)
is the same code for real and simulated clusters; a backend only lists and watches nodes and
pods, creates or deletes pods, and puts a Service in front of a service shard's pods.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from cluster_agents.agent.ranktable import RankTableMount
from federation.compiled import CompiledPort
from federation.podtemplate import PodTemplate
from federation.wire.agent import NodeInfo, PodPhase
from federation.wire.telemetry import DeviceTelemetry, NodeMarks


@dataclass(frozen=True)
class Toleration:
    """A pod toleration (`operator` Exists when `value` is empty)."""

    key: str
    effect: str = "NoSchedule"
    value: str = ""


@dataclass(frozen=True)
class NodeExclusion:
    """Nodes a pod must avoid: those with label `key` (any value, or one of `values`)."""

    key: str
    values: tuple[str, ...] = ()

    def excludes(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with these labels is to be avoided."""
        return self.key in labels and (not self.values or labels[self.key] in self.values)


@dataclass(frozen=True)
class PodSpec:
    """A pod the agent wants in the cluster (rendered from an assignment)."""

    name: str
    namespace: str  # the tenant's (`federation.k8s_names.tenant_namespace`)
    job: str  # job id
    epoch: int
    task: str
    replica: int
    tenant: str
    template: PodTemplate  # the user's pod; what follows is Suanpan's, merged into it
    container: str  # the template's container that gets `image`, `requests` and devices
    image: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    requests: Mapping[str, str]  # of `container`: resource name -> quantity (limits equal)
    cpu_milli: int  # what the whole pod requests (every container, as Kubernetes counts)
    memory_mib: int
    env: Mapping[str, str] = field(default_factory=dict)  # every container's, before its own
    hostname: str = ""  # the pod's stable hostname within `service`
    service: str = ""  # the placement's headless Service, the pod's subdomain ("": none)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    priority: int = 0
    priority_class: str = ""
    scheduler_name: str = ""
    # env var -> pod annotation it is read from when the container starts (a fieldRef), e.g.
    # the visible-devices variable from the devices the extender writes at bind
    env_from_annotations: Mapping[str, str] = field(default_factory=dict)
    avoid_nodes: tuple[NodeExclusion, ...] = ()  # required node anti-affinity
    gang: str = ""  # gang of the pod ("": none); gang pods are created behind a scheduling gate
    gated: bool = False  # created with the `GANG_GATE` scheduling gate
    rank_table: RankTableMount | None = None  # mounted in `container`, named by its variable
    attempt: int = 1  # the replica's run in this placement: 2 and on after failures in place
    # Never: a batch replica ends and the agent decides about retries; Always: a service's
    # containers are restarted in place by the kubelet
    restart_policy: Literal["Never", "Always"] = "Never"


@dataclass(frozen=True)
class ShardService:
    """The ClusterIP Service in front of a service shard's pods (every generation of them):
    named after the service, in the tenant's namespace, selecting the placement's pods."""

    name: str
    namespace: str
    tenant: str
    job: str
    epoch: int
    ports: tuple[CompiledPort, ...]


@dataclass(frozen=True)
class PodStatus:
    """A Suanpan pod as the cluster sees it."""

    name: str
    job: str
    epoch: int
    task: str
    replica: int
    phase: PodPhase
    node: str = ""
    reason: str = ""  # e.g. OOMKilled, ErrImagePull, Unschedulable, NodeLost
    message: str = ""
    deleting: bool = False
    created_at: float = 0.0  # seconds (backend clock)
    gated: bool = False  # a scheduling gate holds it back from scheduling
    host_ip: str = ""  # of its node, once bound and started
    pod_ip: str = ""
    devices: tuple[int, ...] = ()  # the extender's choice at bind (`DEVICES`)
    device_ips: tuple[tuple[int, str], ...] = ()  # (device, address), where the plugin says
    attempt: int = 1  # `ATTEMPT_LABEL`: the replica's run in its placement
    exit_code: int | None = None  # of the container that failed (else of the first that ended)
    restarts: int = 0  # container restarts, all containers together
    ready: bool = False  # its Ready condition (a service's pods pass their readiness probe)
    generation: int = 0  # `GENERATION_LABEL`: a service pod's template generation (0: none)


class LogError(Exception):
    """The backend cannot read the log asked for (no such pod or container)."""


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster says about itself."""

    kubernetes_version: str


class ClusterBackend(Protocol):
    """A member cluster as the agent sees it."""

    changed: asyncio.Event  # set whenever nodes or Suanpan pods changed

    async def start(self) -> None:
        """Connect, list and start watching; return once the first full view is loaded."""

    async def stop(self) -> None:
        """Stop watching and release connections."""

    async def facts(self) -> ClusterFacts:
        """Version and identity of the cluster."""

    def apiserver_problem(self) -> str | None:
        """Why the cluster's API cannot be reached now (its list/watch broken); None if it can."""

    def nodes(self) -> list[NodeInfo]:
        """Current inventory: every node with allocatable, used (all pods) and devices."""

    def pods(self) -> list[PodStatus]:
        """Every pod Suanpan created that still exists."""

    async def create_pods(self, pods: list[PodSpec]) -> None:
        """Create the pods that do not exist yet (by name); existing ones are left alone."""

    async def delete_pods(self, names: list[str], grace_seconds: int) -> None:
        """Delete pods by name (already gone is fine)."""

    async def ungate_pods(self, names: list[str]) -> None:
        """Remove the scheduling gates of these pods (already ungated or gone is fine)."""

    async def write_rank_table(self, namespace: str, mount: RankTableMount, content: str) -> None:
        """Replace the content of a placement's rank table (created with its pods)."""

    async def apply_service(self, service: ShardService) -> str:
        """Create the shard's Service or bring it in step (ports, placement); return its
        cluster IP ("": none). It is deleted with the placement's last pod (`delete_pods`)."""

    def pod_logs(
        self, name: str, container: str, *, follow: bool, tail: int | None, limit_bytes: int
    ) -> AsyncGenerator[bytes, None]:
        """A pod's container log ("": its first container), chunk by chunk, ending with the
        container when following; raises `LogError` when there is no such pod or log."""

    async def telemetry(self) -> list[DeviceTelemetry]:
        """The latest readings of the cluster's devices from their exporters (none: none)."""

    async def mark_devices(self, node: str, marks: NodeMarks) -> None:
        """Tell the cluster's scheduler a node's devices' load bands and fatal errors (the
        devices in fault are reported unhealthy in `nodes()` from then on)."""

    def now(self) -> float:
        """The backend's clock in seconds (simulated backends may run faster than real time)."""
