"""The Kubernetes pod template subset a task may give (pure pydantic, Kubernetes field names).

Strict: unknown fields are refused, names and quantities follow the Kubernetes grammar, and a
choice of sources (a volume's, an env var's `valueFrom`, an `envFrom`) takes exactly one. The
fields Suanpan owns are not in the model, so a template that sets them is refused as unknown:
`schedulerName`, `priorityClassName`, `restartPolicy`, `schedulingGates`, `nodeName`, and
accelerator resources (`resources.limits` takes only cpu, memory and ephemeral-storage; devices
come from `resources.accelerators`). The same models are the compiled form the agent renders:
dumped by alias they are the Kubernetes JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from federation.catalog.quantity import parse_quantity
from federation.k8s_names import DnsLabel, Image, Labels, Text, annotation_map, qualified_name
from federation.validation import NUL_FREE

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_PORT_NAME = re.compile(r"(?=.*[a-z])[a-z0-9]([a-z0-9]|-(?!-))*(?<!-)")
OWNED_PREFIX = "suanpan.io/"

DnsSubdomain = Annotated[
    str, StringConstraints(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
]
EnvName = Annotated[
    str, StringConstraints(min_length=1, max_length=256, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
]
Path = Annotated[str, StringConstraints(min_length=1, max_length=4096), NUL_FREE]
Mode = Annotated[int, Field(ge=0, le=0o777)]
Port = Annotated[int, Field(ge=1, le=65535)]


def label_key(key: str) -> str:
    """`key` if it is a Kubernetes qualified name (a label or annotation key), else ValueError."""
    if not qualified_name(key):
        raise ValueError(f"{key!r} is not a valid Kubernetes label key")
    return key


def _not_owned(value: dict[str, str]) -> dict[str, str]:
    owned = sorted(k for k in value if k.startswith(OWNED_PREFIX))
    if owned:
        raise ValueError(f"keys under {OWNED_PREFIX} are Suanpan's own: {', '.join(owned)}")
    return value


def _port_name(value: str) -> str:
    if len(value) > 15 or not _PORT_NAME.fullmatch(value):
        raise ValueError("a port name is 1-15 lowercase letters, digits and single dashes")
    return value


def _quantity(value: str | int) -> str:
    parse_quantity(str(value))
    return str(value)


Quantity = Annotated[
    Annotated[str, StringConstraints(max_length=64)] | Annotated[int, Field(ge=0)],
    AfterValidator(_quantity),
]
PortName = Annotated[str, AfterValidator(_port_name)]


def effective_request(containers: Iterable[int], init: Iterable[tuple[int, bool]]) -> int:
    """A pod's request of one resource by Kubernetes' rule: its containers and its sidecars
    (`init` entries flagged True: `restartPolicy: Always`) together, or, if larger, an init
    container with the sidecars started before it."""
    sidecars = peak = 0
    for amount, sidecar in init:
        if sidecar:
            sidecars += amount
        else:
            peak = max(peak, sidecars + amount)
    return max(peak, sidecars + sum(containers))


class _K8s(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=False, serialize_by_alias=True
    )


def _exactly_one(model: BaseModel, fields: tuple[str, ...], what: str) -> None:
    given = [f for f in fields if getattr(model, f) is not None]
    if len(given) != 1:
        names = ", ".join(model.__class__.model_fields[f].alias or f for f in fields)
        raise ValueError(f"{what} takes exactly one of {names}; got {len(given)}")


class KeyRef(_K8s):
    """A key of a ConfigMap or Secret (`configMapKeyRef`, `secretKeyRef`)."""

    name: DnsSubdomain
    key: Annotated[
        str, StringConstraints(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
    ]
    optional: bool | None = None


class FieldRef(_K8s):
    """A field of the pod (downward API)."""

    field_path: Path = Field(alias="fieldPath")
    api_version: Literal["v1"] | None = Field(default=None, alias="apiVersion")


class ResourceFieldRef(_K8s):
    """A container's resource limit or request (downward API)."""

    container_name: DnsLabel | None = Field(default=None, alias="containerName")
    resource: Literal[
        "limits.cpu", "limits.memory", "limits.ephemeral-storage",
        "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    ]  # fmt: skip
    divisor: Quantity | None = None


class EnvVarSource(_K8s):
    """Where an env var's value comes from."""

    secret_key_ref: KeyRef | None = Field(default=None, alias="secretKeyRef")
    config_map_key_ref: KeyRef | None = Field(default=None, alias="configMapKeyRef")
    field_ref: FieldRef | None = Field(default=None, alias="fieldRef")
    resource_field_ref: ResourceFieldRef | None = Field(default=None, alias="resourceFieldRef")

    @model_validator(mode="after")
    def _one(self) -> EnvVarSource:
        _exactly_one(self, tuple(type(self).model_fields), "valueFrom")
        return self


class EnvVar(_K8s):
    """An environment variable: a `value` or a `valueFrom`."""

    name: EnvName
    value: Annotated[str, StringConstraints(max_length=32768), NUL_FREE] | None = None
    value_from: EnvVarSource | None = Field(default=None, alias="valueFrom")

    @model_validator(mode="after")
    def _not_both(self) -> EnvVar:
        if self.value is not None and self.value_from is not None:
            raise ValueError("an env var takes `value` or `valueFrom`, not both")
        return self


class NameRef(_K8s):
    """A whole ConfigMap or Secret (`envFrom`)."""

    name: DnsSubdomain
    optional: bool | None = None


class EnvFromSource(_K8s):
    """Every key of a ConfigMap or Secret as env vars."""

    prefix: EnvName | None = None
    config_map_ref: NameRef | None = Field(default=None, alias="configMapRef")
    secret_ref: NameRef | None = Field(default=None, alias="secretRef")

    @model_validator(mode="after")
    def _one(self) -> EnvFromSource:
        _exactly_one(self, ("config_map_ref", "secret_ref"), "envFrom")
        return self


class ContainerPort(_K8s):
    """A port the container listens on."""

    name: PortName | None = None
    container_port: Port = Field(alias="containerPort")
    protocol: Literal["TCP", "UDP", "SCTP"] | None = None
    host_port: Port | None = Field(default=None, alias="hostPort")


class VolumeMount(_K8s):
    """A volume mounted into a container."""

    name: DnsLabel
    mount_path: Path = Field(alias="mountPath")
    read_only: bool | None = Field(default=None, alias="readOnly")
    sub_path: Path | None = Field(default=None, alias="subPath")

    @model_validator(mode="after")
    def _relative_sub_path(self) -> VolumeMount:
        if self.sub_path and (self.sub_path.startswith("/") or ".." in self.sub_path.split("/")):
            raise ValueError("subPath must be a relative path without '..'")
        return self


class ContainerResources(_K8s):
    """Limits of a container (requests equal them; devices come from `accelerators`)."""

    limits: dict[Literal["cpu", "memory", "ephemeral-storage"], Quantity] = Field(
        default_factory=dict
    )


class Capabilities(_K8s):
    """Linux capabilities to add or drop."""

    add: list[Annotated[str, StringConstraints(pattern=r"^[A-Z_]{1,64}$")]] | None = None
    drop: list[Annotated[str, StringConstraints(pattern=r"^[A-Z_]{1,64}$")]] | None = None


class SecurityContext(_K8s):
    """A container's security context."""

    privileged: bool | None = None
    run_as_user: Annotated[int, Field(ge=0)] | None = Field(default=None, alias="runAsUser")
    run_as_group: Annotated[int, Field(ge=0)] | None = Field(default=None, alias="runAsGroup")
    run_as_non_root: bool | None = Field(default=None, alias="runAsNonRoot")
    read_only_root_filesystem: bool | None = Field(default=None, alias="readOnlyRootFilesystem")
    allow_privilege_escalation: bool | None = Field(default=None, alias="allowPrivilegeEscalation")
    capabilities: Capabilities | None = None


class PodSecurityContext(_K8s):
    """The pod's security context."""

    run_as_user: Annotated[int, Field(ge=0)] | None = Field(default=None, alias="runAsUser")
    run_as_group: Annotated[int, Field(ge=0)] | None = Field(default=None, alias="runAsGroup")
    run_as_non_root: bool | None = Field(default=None, alias="runAsNonRoot")
    fs_group: Annotated[int, Field(ge=0)] | None = Field(default=None, alias="fsGroup")
    supplemental_groups: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None, alias="supplementalGroups"
    )


class HttpGetAction(_K8s):
    """An HTTP GET a probe sends to the container."""

    path: Path = "/"
    port: Port | PortName
    scheme: Literal["HTTP", "HTTPS"] | None = None


class TcpSocketAction(_K8s):
    """A TCP connection a probe opens to the container."""

    port: Port | PortName


class ExecAction(_K8s):
    """A command a probe runs in the container."""

    command: list[Text] = Field(min_length=1, max_length=64)


class Probe(_K8s):
    """A readiness or liveness probe, as in a Kubernetes container: exactly one action."""

    http_get: HttpGetAction | None = Field(default=None, alias="httpGet")
    tcp_socket: TcpSocketAction | None = Field(default=None, alias="tcpSocket")
    exec_: ExecAction | None = Field(default=None, alias="exec")
    initial_delay_seconds: Annotated[int, Field(ge=0, le=3600)] | None = Field(
        default=None, alias="initialDelaySeconds"
    )
    period_seconds: Annotated[int, Field(ge=1, le=3600)] | None = Field(
        default=None, alias="periodSeconds"
    )
    timeout_seconds: Annotated[int, Field(ge=1, le=3600)] | None = Field(
        default=None, alias="timeoutSeconds"
    )
    success_threshold: Annotated[int, Field(ge=1, le=100)] | None = Field(
        default=None, alias="successThreshold"
    )
    failure_threshold: Annotated[int, Field(ge=1, le=100)] | None = Field(
        default=None, alias="failureThreshold"
    )

    @model_validator(mode="after")
    def _one_action(self) -> Probe:
        actions = [a for a in (self.http_get, self.tcp_socket, self.exec_) if a is not None]
        if len(actions) != 1:
            raise ValueError("a probe has exactly one of httpGet, tcpSocket, exec")
        return self


class Container(_K8s):
    """A container (in `initContainers`, `restartPolicy: Always` makes it a sidecar)."""

    name: DnsLabel
    image: Image | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        default=None, alias="imagePullPolicy"
    )
    command: list[Text] | None = Field(default=None, max_length=64)
    args: list[Text] | None = Field(default=None, max_length=256)
    working_dir: Path | None = Field(default=None, alias="workingDir")
    env: list[EnvVar] | None = Field(default=None, max_length=256)
    env_from: list[EnvFromSource] | None = Field(default=None, alias="envFrom", max_length=64)
    ports: list[ContainerPort] | None = Field(default=None, max_length=64)
    volume_mounts: list[VolumeMount] | None = Field(
        default=None, alias="volumeMounts", max_length=64
    )
    resources: ContainerResources | None = None
    security_context: SecurityContext | None = Field(default=None, alias="securityContext")
    restart_policy: Literal["Always"] | None = Field(default=None, alias="restartPolicy")
    readiness_probe: Probe | None = Field(default=None, alias="readinessProbe")
    liveness_probe: Probe | None = Field(default=None, alias="livenessProbe")


class KeyToPath(_K8s):
    """A key of a ConfigMap or Secret projected to a file."""

    key: Annotated[str, StringConstraints(min_length=1, max_length=253)]
    path: Path
    mode: Mode | None = None


class ConfigMapVolume(_K8s):
    """A ConfigMap as files."""

    name: DnsSubdomain
    items: list[KeyToPath] | None = None
    default_mode: Mode | None = Field(default=None, alias="defaultMode")
    optional: bool | None = None


class SecretVolume(_K8s):
    """A Secret as files."""

    secret_name: DnsSubdomain = Field(alias="secretName")
    items: list[KeyToPath] | None = None
    default_mode: Mode | None = Field(default=None, alias="defaultMode")
    optional: bool | None = None


class EmptyDirVolume(_K8s):
    """A scratch directory of the pod."""

    medium: Literal["", "Memory"] | None = None
    size_limit: Quantity | None = Field(default=None, alias="sizeLimit")


class ClaimVolume(_K8s):
    """A PersistentVolumeClaim of the pod's namespace."""

    claim_name: DnsSubdomain = Field(alias="claimName")
    read_only: bool | None = Field(default=None, alias="readOnly")


class HostPathVolume(_K8s):
    """A path of the node (a tenant policy may forbid it)."""

    path: Path
    type: (
        Literal[
            "", "DirectoryOrCreate", "Directory", "FileOrCreate", "File",
            "Socket", "CharDevice", "BlockDevice",
        ]
        | None
    ) = None  # fmt: skip


class ProjectedConfigMap(_K8s):
    """A ConfigMap in a projected volume."""

    name: DnsSubdomain
    items: list[KeyToPath] | None = None
    optional: bool | None = None


class ServiceAccountToken(_K8s):
    """A bound service account token in a projected volume."""

    path: Path
    audience: Text | None = None
    expiration_seconds: Annotated[int, Field(ge=600)] | None = Field(
        default=None, alias="expirationSeconds"
    )


class Projection(_K8s):
    """One source of a projected volume."""

    config_map: ProjectedConfigMap | None = Field(default=None, alias="configMap")
    secret: ProjectedConfigMap | None = None
    service_account_token: ServiceAccountToken | None = Field(
        default=None, alias="serviceAccountToken"
    )

    @model_validator(mode="after")
    def _one(self) -> Projection:
        _exactly_one(self, tuple(type(self).model_fields), "a projection")
        return self


class ProjectedVolume(_K8s):
    """Several sources in one directory."""

    sources: list[Projection] = Field(min_length=1, max_length=32)
    default_mode: Mode | None = Field(default=None, alias="defaultMode")


class Volume(_K8s):
    """A volume of the pod: a name and exactly one source."""

    name: DnsLabel
    config_map: ConfigMapVolume | None = Field(default=None, alias="configMap")
    secret: SecretVolume | None = None
    empty_dir: EmptyDirVolume | None = Field(default=None, alias="emptyDir")
    persistent_volume_claim: ClaimVolume | None = Field(default=None, alias="persistentVolumeClaim")
    projected: ProjectedVolume | None = None
    host_path: HostPathVolume | None = Field(default=None, alias="hostPath")

    @model_validator(mode="after")
    def _one(self) -> Volume:
        _exactly_one(self, tuple(f for f in type(self).model_fields if f != "name"), "a volume")
        return self


class Toleration(_K8s):
    """A toleration of node taints."""

    key: Annotated[str, AfterValidator(label_key)] | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: Annotated[str, StringConstraints(max_length=63)] | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds")

    @model_validator(mode="after")
    def _grammar(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError("operator Exists takes no value")
        if not self.key and self.operator != "Exists":
            raise ValueError("a toleration without key needs operator Exists")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("tolerationSeconds needs effect NoExecute")
        return self


class NodeSelectorRequirement(_K8s):
    """One expression on node labels (or fields)."""

    key: Annotated[str, AfterValidator(label_key)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[Annotated[str, StringConstraints(max_length=63)]] | None = None

    @model_validator(mode="after")
    def _values(self) -> NodeSelectorRequirement:
        n = len(self.values or [])
        if self.operator in ("In", "NotIn") and n == 0:
            raise ValueError(f"operator {self.operator} needs values")
        if self.operator in ("Exists", "DoesNotExist") and n:
            raise ValueError(f"operator {self.operator} takes no values")
        if self.operator in ("Gt", "Lt") and (n != 1 or not (self.values or [""])[0].isdigit()):
            raise ValueError(f"operator {self.operator} needs one integer value")
        return self


class NodeSelectorTerm(_K8s):
    """Expressions that must all hold."""

    match_expressions: list[NodeSelectorRequirement] | None = Field(
        default=None, alias="matchExpressions"
    )
    match_fields: list[NodeSelectorRequirement] | None = Field(default=None, alias="matchFields")


class NodeSelector(_K8s):
    """Terms of which one must hold."""

    node_selector_terms: list[NodeSelectorTerm] = Field(
        alias="nodeSelectorTerms", min_length=1, max_length=32
    )


class PreferredNodeTerm(_K8s):
    """A weighted preference for nodes."""

    weight: Annotated[int, Field(ge=1, le=100)]
    preference: NodeSelectorTerm


class NodeAffinity(_K8s):
    """Which nodes the pod must or should land on."""

    required: NodeSelector | None = Field(
        default=None, alias="requiredDuringSchedulingIgnoredDuringExecution"
    )
    preferred: list[PreferredNodeTerm] | None = Field(
        default=None, alias="preferredDuringSchedulingIgnoredDuringExecution"
    )


class LabelRequirement(_K8s):
    """One expression of a label selector."""

    key: Annotated[str, AfterValidator(label_key)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[Annotated[str, StringConstraints(max_length=63)]] | None = None


class LabelSelector(_K8s):
    """A label selector of pods."""

    match_labels: Labels | None = Field(default=None, alias="matchLabels")
    match_expressions: list[LabelRequirement] | None = Field(default=None, alias="matchExpressions")


class PodAffinityTerm(_K8s):
    """Pods the pod must (not) share a topology domain with."""

    label_selector: LabelSelector | None = Field(default=None, alias="labelSelector")
    topology_key: Annotated[str, AfterValidator(label_key)] = Field(alias="topologyKey")
    namespaces: list[DnsLabel] | None = None


class PreferredPodTerm(_K8s):
    """A weighted pod (anti-)affinity preference."""

    weight: Annotated[int, Field(ge=1, le=100)]
    pod_affinity_term: PodAffinityTerm = Field(alias="podAffinityTerm")


class PodAffinity(_K8s):
    """Pod affinity or anti-affinity."""

    required: list[PodAffinityTerm] | None = Field(
        default=None, alias="requiredDuringSchedulingIgnoredDuringExecution"
    )
    preferred: list[PreferredPodTerm] | None = Field(
        default=None, alias="preferredDuringSchedulingIgnoredDuringExecution"
    )


class Affinity(_K8s):
    """Node and pod (anti-)affinity; Suanpan merges its own node rules into it."""

    node_affinity: NodeAffinity | None = Field(default=None, alias="nodeAffinity")
    pod_affinity: PodAffinity | None = Field(default=None, alias="podAffinity")
    pod_anti_affinity: PodAffinity | None = Field(default=None, alias="podAntiAffinity")


class LocalObjectReference(_K8s):
    """A Secret of the pod's namespace, by name (`imagePullSecrets`)."""

    name: DnsSubdomain


def _unique(items: list[Container] | list[Volume] | None, what: str) -> None:
    names = [i.name for i in items or []]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{what} names must be unique; repeated: {', '.join(repeated)}")


class TemplateSpec(_K8s):
    """The pod spec of a template."""

    containers: list[Container] = Field(min_length=1, max_length=16)
    init_containers: list[Container] | None = Field(
        default=None, alias="initContainers", max_length=16
    )
    volumes: list[Volume] | None = Field(default=None, max_length=64)
    service_account_name: DnsSubdomain | None = Field(default=None, alias="serviceAccountName")
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None, alias="imagePullSecrets", max_length=16
    )
    node_selector: Labels | None = Field(default=None, alias="nodeSelector")
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = Field(default=None, max_length=64)
    termination_grace_period_seconds: Annotated[int, Field(ge=0, le=86400)] | None = Field(
        default=None, alias="terminationGracePeriodSeconds"
    )
    security_context: PodSecurityContext | None = Field(default=None, alias="securityContext")
    host_network: bool | None = Field(default=None, alias="hostNetwork")

    @model_validator(mode="after")
    def _references(self) -> TemplateSpec:
        for c in self.containers:
            if c.restart_policy is not None:
                raise ValueError(f"container {c.name!r}: restartPolicy is for initContainers")
        every = [*self.containers, *(self.init_containers or [])]
        _unique(every, "container")
        _unique(self.volumes, "volume")
        volumes = {v.name for v in self.volumes or []}
        for c in every:
            for m in c.volume_mounts or []:
                if m.name not in volumes:
                    raise ValueError(f"container {c.name!r} mounts unknown volume {m.name!r}")
        return self


class TemplateMetadata(_K8s):
    """Labels and annotations of the pods (keys under `suanpan.io/` are Suanpan's)."""

    labels: Annotated[Labels, AfterValidator(_not_owned)] = Field(default_factory=dict)
    annotations: Annotated[dict[str, Text], AfterValidator(annotation_map)] = Field(
        default_factory=dict, max_length=64
    )


class PodTemplate(_K8s):
    """A pod template: `metadata` and `spec`, as in a Kubernetes Deployment or Job."""

    metadata: TemplateMetadata = TemplateMetadata()
    spec: TemplateSpec
