"""The job manifest users submit: one pydantic model, the source of validation and OpenAPI.

A manifest is Kubernetes-like (`apiVersion/kind/metadata/spec`). Accelerators are asked for by
capability (count, share of one device, minimum memory) with `anyOf` flavor alternatives
matched against the catalog; images may be given per vendor.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from federation.catalog.quantity import parse_quantity
from federation.catalog.types import Vendor
from federation.k8s_names import (
    DnsLabel,
    Image,
    Labels,
    Text,
    annotation_map,
)
from federation.podtemplate import PodTemplate
from federation.validation import NUL_FREE

MAX_TASKS = 16
MAX_REPLICAS = 1024
MAX_FLAVOR_CHOICES = 16


def _cpu(value: str | int) -> str:
    milli = parse_quantity(str(value)) * 1000
    if milli < 1 or milli > 1024 * 1000:
        raise ValueError("cpu must be between 1m and 1024")
    return str(value)


def _memory(value: str | int) -> str:
    size = parse_quantity(str(value))
    if size < 2**20 or size > 64 * 2**40:
        raise ValueError("memory must be between 1Mi and 64Ti")
    return str(value)


_Quantity = Annotated[str, StringConstraints(max_length=64)] | Annotated[int, Field(ge=0)]
CpuQuantity = Annotated[_Quantity, AfterValidator(_cpu)]
MemoryQuantity = Annotated[_Quantity, AfterValidator(_memory)]


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", populate_by_name=False, frozen=True, allow_inf_nan=False
    )


class FlavorChoice(_Strict):
    """One acceptable accelerator flavor, with optional per-flavor overrides."""

    flavor: str = Field(
        min_length=3,
        max_length=128,
        pattern=r"^[a-z0-9-]+/[A-Za-z0-9.*_+-]+$",
        description='Catalog flavor or pattern: "huawei/Ascend910B3", "nvidia/H100*", "metax/*"',
    )
    image: Image | None = Field(default=None, description="image for this flavor")
    count: int | None = Field(
        default=None, ge=1, le=64, description="devices per replica on this flavor"
    )


class Accelerators(_Strict):
    """Accelerators per replica, asked for by capability."""

    count: int = Field(default=1, ge=1, le=64, description="whole devices per replica")
    fraction: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="share of ONE device (compute), for GPU sharing; needs count 1",
    )
    min_memory: MemoryQuantity | None = Field(
        default=None, alias="minMemory", description="memory per device (or per share)"
    )
    any_of: list[FlavorChoice] = Field(
        alias="anyOf",
        min_length=1,
        max_length=MAX_FLAVOR_CHOICES,
        description="acceptable flavors, in order of preference",
    )

    @model_validator(mode="after")
    def _fraction_needs_one(self) -> Accelerators:
        if self.fraction is not None and self.count != 1:
            raise ValueError("fraction needs count 1: a share is a part of one device")
        return self


class Resources(_Strict):
    """Per-replica resources."""

    cpu: CpuQuantity = "1"
    memory: MemoryQuantity = "1Gi"
    accelerators: Accelerators | None = None


class Task(_Strict):
    """One role of a job: replicas of the same pod template."""

    name: DnsLabel
    replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS, description="a fixed replica count")
    min_replicas: int | None = Field(
        default=None,
        alias="minReplicas",
        ge=1,
        le=MAX_REPLICAS,
        description="elastic (with maxReplicas, instead of replicas): the job starts once this "
        "many fit, as a gang, and never runs with fewer",
    )
    max_replicas: int | None = Field(
        default=None,
        alias="maxReplicas",
        ge=1,
        le=MAX_REPLICAS,
        description="elastic: the most replicas it grows to in capacity nothing else waits for",
    )
    image: Image | None = None
    images: dict[Vendor, Image] = Field(
        default_factory=dict, description="image per accelerator vendor"
    )
    command: list[Text] = Field(default_factory=list, max_length=64)
    args: list[Text] = Field(default_factory=list, max_length=256)
    env: dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)],
        Annotated[str, StringConstraints(max_length=32768), NUL_FREE],
    ] = Field(default_factory=dict, max_length=128)
    annotations: Annotated[
        dict[Annotated[str, StringConstraints(max_length=317)], Text],
        AfterValidator(annotation_map),
    ] = Field(default_factory=dict, max_length=64, description="pod annotations")
    resources: Resources = Resources()
    template: PodTemplate | None = Field(
        default=None, description="a Kubernetes pod template (instead of image/command/args/env)"
    )
    container: DnsLabel | None = Field(
        default=None,
        description="the template's container that gets resources and devices (default: first)",
    )

    @model_validator(mode="after")
    def _elastic_bounds(self) -> Task:
        low, high = self.min_replicas, self.max_replicas
        if low is None and high is None:
            return self
        if low is None or high is None:
            raise ValueError("an elastic task gives both minReplicas and maxReplicas")
        if "replicas" in self.model_fields_set:
            raise ValueError(
                "give either replicas (a fixed count) or minReplicas and maxReplicas (elastic: "
                "the scheduler picks the count between them), not both"
            )
        if low > high:
            raise ValueError(f"minReplicas ({low}) must not exceed maxReplicas ({high})")
        return self

    @model_validator(mode="after")
    def _has_image(self) -> Task:
        accel = self.resources.accelerators
        choices_with_image = accel is not None and all(c.image for c in accel.any_of)
        in_template = self.template is not None and any(
            c.image for c in self.template.spec.containers
        )
        if not (self.image or self.images or choices_with_image or in_template):
            raise ValueError(
                "give an image: `image`, `images` per vendor, one per flavor, or in `template`"
            )
        return self


class Placement(_Strict):
    """Where the job may run."""

    regions: list[DnsLabel] = Field(default_factory=list, max_length=32)
    clusters: list[DnsLabel] = Field(default_factory=list, max_length=256)
    cluster_selector: Labels = Field(default_factory=dict, alias="clusterSelector")


FailoverPolicy = Literal["fast", "exclusive"]
OnFailure = Literal["requeue", "fail"]
DEFAULT_BACKOFF_LIMIT = 3
MAX_BACKOFF_LIMIT = 100


class FailurePolicy(_Strict):
    """What a failure does to the job: retries of a failed replica in place, and whether a
    lost node or cluster sends the job back to the queue (run elsewhere) or fails it."""

    backoff_limit: int = Field(
        default=DEFAULT_BACKOFF_LIMIT,
        alias="backoffLimit",
        ge=0,
        le=MAX_BACKOFF_LIMIT,
        description="times a failed replica is run again in place before the job fails",
    )
    on_node_failure: OnFailure = Field(
        default="requeue",
        alias="onNodeFailure",
        description="a pod lost with its node (gone, NotReady, evicted): requeue or fail",
    )
    on_cluster_failure: OnFailure = Field(
        default="requeue",
        alias="onClusterFailure",
        description="its cluster lost (Offline): requeue (per `failover`) or fail",
    )


MAX_GRACE_SECONDS = 3600
DEFAULT_GRACE_SECONDS = 30  # what pods get when their job names no grace period (the agent's)


class Checkpoint(_Strict):
    """How the job saves its work: the scheduler prefers evicting jobs that lose least."""

    interval_seconds: int | None = Field(
        default=None,
        alias="intervalSeconds",
        ge=1,
        le=7 * 86400,
        description="the job checkpoints this often from its start",
    )
    grace_period_seconds: int | None = Field(
        default=None,
        alias="gracePeriodSeconds",
        ge=0,
        le=MAX_GRACE_SECONDS,
        description="when evicted, pods get SIGTERM and this long to checkpoint before SIGKILL "
        "(default: the agent's)",
    )


class JobSpec(_Strict):
    """What to run and under which policy."""

    queue: DnsLabel
    priority_class: DnsLabel = Field(default="normal", alias="priorityClass")
    preemptible: bool | None = Field(
        default=None, description="may be evicted for higher priority (default: the class's)"
    )
    gang: bool = Field(default=True, description="all replicas of all tasks start together")
    max_runtime_seconds: int | None = Field(
        default=None, alias="maxRuntimeSeconds", ge=1, le=90 * 86400
    )
    placement: Placement = Placement()
    checkpoint: Checkpoint | None = None
    failover: FailoverPolicy | None = Field(
        default=None,
        description="when its cluster is lost: fast (requeue at once, may briefly run twice) "
        "or exclusive (requeue only once its pods are surely stopped); default: the fleet's",
    )
    failure_policy: FailurePolicy | None = Field(
        default=None, alias="failurePolicy", description="default: 3 retries, requeue"
    )
    tasks: list[Task] = Field(min_length=1, max_length=MAX_TASKS)

    @model_validator(mode="after")
    def _unique_task_names(self) -> JobSpec:
        names = [t.name for t in self.tasks]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"task names must be unique; repeated: {', '.join(duplicates)}")
        return self

    @model_validator(mode="after")
    def _elastic_is_a_gang(self) -> JobSpec:
        if not self.gang and any(t.min_replicas is not None for t in self.tasks):
            raise ValueError(
                "an elastic task starts as a gang of its minReplicas: remove `gang: false`"
            )
        return self


class Metadata(_Strict):
    """Name, labels and (for admins) the tenant of a job."""

    name: DnsLabel
    tenant: DnsLabel | None = Field(default=None, description="required for admin tokens")
    labels: Labels = Field(default_factory=dict)


class JobManifest(_Strict):
    """A job as submitted: `apiVersion: suanpan.io/v1`, `kind: Job`."""

    api_version: Literal["suanpan.io/v1"] = Field(alias="apiVersion")
    kind: Literal["Job"]
    metadata: Metadata
    spec: JobSpec


MAX_SPREAD = 16
MAX_SERVICE_PORTS = 16
MetricName = Annotated[str, StringConstraints(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]{0,199}$")]


class ServicePort(_Strict):
    """A port the service's pods listen on, exposed by a Service in each cluster it runs in."""

    name: DnsLabel
    port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"


class Spread(_Strict):
    """How many clusters the replicas spread over (each cluster's share is a placement of
    its own), for availability."""

    clusters: int = Field(default=1, ge=1, le=MAX_SPREAD)


DEVICE_UTILIZATION = "device_utilization"


class ScaleMetric(_Strict):
    """The metric autoscaling follows, averaged over the ready replicas read: a gauge each
    replica serves in the Prometheus text format (`source: pods`), or the utilization of the
    devices each replica holds, in percent, as the vendors' exporters read it (`devices`)."""

    source: Literal["pods", "devices"] = "pods"
    name: MetricName = Field(
        default=DEVICE_UTILIZATION,
        description="pods: the gauge, e.g. requests in flight, queue length, tokens per second",
    )
    target: float = Field(gt=0, le=1e12, description="the per-replica average to keep")
    port: int | None = Field(
        default=None, ge=1, le=65535, description="pods: the port serving the metrics"
    )
    path: Annotated[str, StringConstraints(pattern=r"^/[\x21-\x7e]{0,255}$")] = "/metrics"

    @model_validator(mode="after")
    def _source(self) -> ScaleMetric:
        given = self.model_fields_set
        if self.source == "pods" and ("name" not in given or self.port is None):
            raise ValueError("a metric the pods serve needs its name and port")
        if self.source == "devices" and given & {"name", "port", "path"}:
            raise ValueError(
                "the devices' utilization is read from the vendors' exporters: give no name, "
                "port or path"
            )
        if self.source == "devices" and self.target > 100:
            raise ValueError("a utilization target is a percentage: at most 100")
        return self


class Autoscaling(_Strict):
    """The Horizontal Pod Autoscaler's rule across clusters: desired = ceil(ready x average /
    target), left alone within `tolerance`, bounded by the task's minReplicas/maxReplicas; a
    recommendation takes effect once it is the least (up) or the most (down) of its window."""

    metric: ScaleMetric
    tolerance: float = Field(default=0.1, ge=0, lt=1)
    scale_up_stabilization_seconds: int = Field(
        default=0, alias="scaleUpStabilizationSeconds", ge=0, le=3600
    )
    scale_down_stabilization_seconds: int = Field(
        default=300, alias="scaleDownStabilizationSeconds", ge=0, le=3600
    )


class ServerTask(Task):
    """The pods of a service: one role (its name defaults to `server`)."""

    name: DnsLabel = "server"


class ServiceSpec(_Strict):
    """A long-running service: replicas that are not a gang, spread over clusters, exposed on
    ports, scaled by a metric."""

    queue: DnsLabel
    priority_class: DnsLabel = Field(default="normal", alias="priorityClass")
    preemptible: bool | None = Field(
        default=None, description="may be scaled in for higher priority (default: the class's)"
    )
    placement: Placement = Placement()
    spread: Spread = Spread()
    ports: list[ServicePort] = Field(min_length=1, max_length=MAX_SERVICE_PORTS)
    autoscaling: Autoscaling | None = None
    server: ServerTask

    @model_validator(mode="after")
    def _scaling(self) -> ServiceSpec:
        elastic = self.server.max_replicas is not None
        if self.autoscaling is not None and not elastic:
            raise ValueError("autoscaling needs server.minReplicas and server.maxReplicas")
        if elastic and self.autoscaling is None:
            raise ValueError(
                "server.minReplicas/maxReplicas scale a service by a metric: give autoscaling"
            )
        most = self.server.max_replicas or self.server.replicas
        if self.spread.clusters > most:
            raise ValueError(
                f"spread.clusters ({self.spread.clusters}) exceeds the most replicas ({most})"
            )
        names = [p.name for p in self.ports]
        numbers = [p.port for p in self.ports]
        if len(set(names)) != len(names) or len(set(numbers)) != len(numbers):
            raise ValueError("port names and numbers must be unique")
        return self


class ServiceMetadata(Metadata):
    """A service's name, labels and tenant: the name is a Kubernetes Service's in each cluster."""

    @field_validator("name")
    @classmethod
    def _rfc1035(cls, name: str) -> str:
        if not name[0].isalpha():
            raise ValueError("must start with a letter: it names a Kubernetes Service (RFC 1035)")
        return name


class ServiceManifest(_Strict):
    """A service as submitted: `apiVersion: suanpan.io/v1`, `kind: Service`."""

    api_version: Literal["suanpan.io/v1"] = Field(alias="apiVersion")
    kind: Literal["Service"]
    metadata: ServiceMetadata
    spec: ServiceSpec
