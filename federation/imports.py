"""Manifests people already have, converted into a Suanpan job before compilation (pure).

Accepted as they are: a Kubernetes `batch/v1` Job and a Kubeflow `kubeflow.org/v1` PyTorchJob
(`pytorchReplicaSpecs` Master and Worker). Rules, each applied here only:

- Tasks: a batch Job is one task `main` of `completions` replicas (else `parallelism`, else 1;
  all run at once, so a `parallelism` below `completions` is refused), not a gang; a PyTorchJob
  is the task `master` (1 replica) then `worker`, a gang, so RANK 0 and `MASTER_ADDR` are the
  master's.
- The task's container is the one that requests accelerators, else the first. Its cpu and
  memory (limits, else requests) become the task's; other containers keep theirs as limits.
- A whole-device resource of the catalog (`nvidia.com/gpu`, `huawei.com/Ascend910B3`, ...)
  becomes a vendor-neutral request of that many devices on the models it counts, plus every
  model of each vendor that annotation `suanpan.io/image.<vendor>` gives an image for.
  `suanpan.io/flavors` (comma-separated) replaces the flavor list.
- Tenant, queue and priority class come from `suanpan.io/tenant`, `suanpan.io/queue` (default
  `default`) and `suanpan.io/priority-class`; the pod's `restartPolicy` is dropped (Suanpan
  restarts nothing in place).

Errors name the field of the manifest as given: `spec.template.spec.containers[0]...`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, RootModel, Tag, ValidationError

from federation.catalog import AcceleratorModel, Catalog, Vendor
from federation.compiler import CompileError
from federation.spec import JobManifest
from federation.validation import field_path

IMAGE_PREFIX = "suanpan.io/image."
TENANT = "suanpan.io/tenant"
QUEUE = "suanpan.io/queue"
PRIORITY_CLASS = "suanpan.io/priority-class"
FLAVORS = "suanpan.io/flavors"
DEFAULT_QUEUE = "default"
# fields of the Suanpan job an annotation gives
FROM_ANNOTATIONS = {
    ("metadata", "tenant"): TENANT,
    ("spec", "queue"): QUEUE,
    ("spec", "priorityClass"): PRIORITY_CLASS,
}
POD_LIMITS = ("cpu", "memory", "ephemeral-storage")
Loc = tuple[str | int, ...]


class KubernetesManifest(BaseModel):
    """A `batch/v1` Job or `kubeflow.org/v1` PyTorchJob; its fields are read by `to_manifest`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    api_version: Literal["batch/v1", "kubeflow.org/v1"] = Field(alias="apiVersion")
    kind: Literal["Job", "PyTorchJob"]
    metadata: dict[str, Any]
    spec: dict[str, Any]


def _tag(value: Any) -> str:
    version = (
        value.get("apiVersion") if isinstance(value, dict) else getattr(value, "api_version", None)
    )
    return "kubernetes" if version in ("batch/v1", "kubeflow.org/v1") else "suanpan"


class Submission(
    RootModel[
        Annotated[
            Annotated[JobManifest, Tag("suanpan")]
            | Annotated[KubernetesManifest, Tag("kubernetes")],
            Discriminator(_tag),
        ]
    ]
):
    """What `POST /v1/jobs` takes: a Suanpan job, or a Kubernetes Job or PyTorchJob.

    Errors locate fields from the manifest's root, without the union's tag."""

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Submission:
        try:
            return super().model_validate_json(json_data, **kwargs)
        except ValidationError as exc:
            raise relocated(exc, lambda loc: loc[1:] if loc[:1] in TAGS else loc) from exc


TAGS = (("suanpan",), ("kubernetes",))


def relocated(exc: ValidationError, origin: Callable[[Loc], Loc]) -> ValidationError:
    """The same errors, each at `origin(loc)`."""
    details: list[Any] = [
        {"type": e["type"], "loc": origin(tuple(e["loc"])), "input": e["input"]}
        | ({"ctx": e["ctx"]} if "ctx" in e else {})
        for e in exc.errors(include_url=False)
    ]
    return ValidationError.from_exception_data(exc.title, details)


def _object(value: object, loc: Loc) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CompileError(field_path(loc), "must be an object", "an object")
    return value


class _Conversion:
    """One manifest being converted: the Suanpan form and where each of its parts came from."""

    def __init__(self, catalog: Catalog, metadata: dict[str, Any]) -> None:
        self.catalog = catalog
        notes = _object(metadata.get("annotations", {}), ("metadata", "annotations"))
        self.notes: dict[str, Any] = notes
        self.images = {
            key.removeprefix(IMAGE_PREFIX): value
            for key, value in notes.items()
            if key.startswith(IMAGE_PREFIX)
        }
        self.origins: dict[Loc, Loc] = {}

    def task(
        self, index: int, name: str, replicas: object, template: object, at: Loc
    ) -> dict[str, Any]:
        """Task `index`, of the pod template found at `at` (its replicas beside it)."""
        here: Loc = ("spec", "tasks", index)
        pod = _object(template, at)
        spec = dict(_object(pod.get("spec"), (*at, "spec")))
        spec.pop("restartPolicy", None)
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            raise CompileError(
                field_path((*at, "spec", "containers")), "needs a container", "a list"
            )
        containers = [
            dict(_object(c, (*at, "spec", "containers", i))) for i, c in enumerate(containers)
        ]
        devices = [
            self._devices(c, (*at, "spec", "containers", i)) for i, c in enumerate(containers)
        ]
        main = next((i for i, d in enumerate(devices) if d), 0)
        resources: dict[str, Any] = {}
        for i, container in enumerate(containers):
            limits = self._limits(container, (*at, "spec", "containers", i))
            if i == main:
                for name_ in ("cpu", "memory"):
                    if name_ in limits:
                        resources[name_] = limits.pop(name_)
                        self.origins[(*here, "resources", name_)] = (
                            *at, "spec", "containers", i, "resources", "limits", name_
                        )  # fmt: skip
            container.pop("resources", None)
            if limits:
                container["resources"] = {"limits": limits}
        if devices[main]:
            resources["accelerators"] = self._accelerators(devices[main], here)
        spec["containers"] = containers
        self.origins[(*here, "template")] = at
        self.origins[(*here, "replicas")] = (*at[:-1], "replicas")
        self.origins[(*here, "images")] = ("metadata", "annotations")
        task: dict[str, Any] = {
            "name": name,
            "replicas": replicas,
            "template": {**pod, "spec": spec},
            "resources": resources,
            "container": containers[main].get("name"),
        }
        if self.images:
            task["images"] = self.images
        return task

    def _limits(self, container: dict[str, Any], at: Loc) -> dict[str, Any]:
        resources = _object(container.get("resources", {}), (*at, "resources"))
        requests = _object(resources.get("requests", {}), (*at, "resources", "requests"))
        limits = _object(resources.get("limits", {}), (*at, "resources", "limits"))
        merged = {**requests, **limits}
        return {k: v for k, v in merged.items() if k in POD_LIMITS}

    def _devices(self, container: dict[str, Any], at: Loc) -> dict[str, tuple[object, Loc]]:
        """Extended resources of a container: name -> (amount, where it was given)."""
        resources = _object(container.get("resources", {}), (*at, "resources"))
        found: dict[str, tuple[object, Loc]] = {}
        for part in ("requests", "limits"):
            given = _object(resources.get(part, {}), (*at, "resources", part))
            for name, amount in given.items():
                if name not in POD_LIMITS:
                    found[name] = (amount, (*at, "resources", part, name))
        return found

    def _accelerators(self, devices: dict[str, tuple[object, Loc]], here: Loc) -> dict[str, Any]:
        if len(devices) > 1:
            where = field_path(next(iter(devices.values()))[1])
            raise CompileError(where, "one accelerator resource per container", "one of them")
        ((resource, (amount, loc)),) = devices.items()
        models = [m for m in self.catalog.models.values() if resource in m.resources]
        if not models:
            raise CompileError(
                field_path(loc),
                f"{resource!r} is not a whole-device resource of the catalog",
                "e.g. nvidia.com/gpu, see /v1/flavors",
            )
        count = (
            amount if isinstance(amount, int) else int(str(amount)) if str(amount).isdigit() else 0
        )
        if count < 1:
            raise CompileError(
                field_path(loc), "must be a whole number of devices", "an integer >= 1"
            )
        self.origins[(*here, "resources", "accelerators", "count")] = loc
        return {"count": count, "anyOf": [{"flavor": f} for f in self._flavors(models, here)]}

    def _flavors(self, models: list[AcceleratorModel], here: Loc) -> list[str]:
        chosen = self.notes.get(FLAVORS)
        if isinstance(chosen, str) and chosen.strip():
            self.origins[(*here, "resources", "accelerators", "anyOf")] = (
                "metadata", "annotations", FLAVORS
            )  # fmt: skip
            return [f.strip() for f in chosen.split(",") if f.strip()]
        vendors = {m.vendor for m in models}
        flavors: list[str] = []
        for vendor in vendors:
            own = [m for m in self.catalog.models.values() if m.vendor is vendor]
            whole = len(own) == len([m for m in models if m.vendor is vendor])
            flavors += [f"{vendor.value}/*"] if whole else sorted(m.key for m in models)
        known = {v.value for v in Vendor}
        flavors += [f"{v}/*" for v in self.images if v in known and Vendor(v) not in vendors]
        return flavors

    def manifest(self, name: object, spec: dict[str, Any]) -> JobManifest:
        """The Suanpan manifest; validation errors name the fields of the original."""
        meta: dict[str, Any] = {"name": name}
        document_parts = {"metadata": meta, "spec": spec | {"queue": DEFAULT_QUEUE}}
        for (part, field), key in FROM_ANNOTATIONS.items():
            if key in self.notes:
                document_parts[part][field] = self.notes[key]
            self.origins[(part, field)] = ("metadata", "annotations", key)
        meta, spec = document_parts["metadata"], document_parts["spec"]
        document = {"apiVersion": "suanpan.io/v1", "kind": "Job", "metadata": meta, "spec": spec}
        try:
            return JobManifest.model_validate(document)
        except ValidationError as exc:
            raise relocated(exc, self._origin) from exc

    def _origin(self, loc: Loc) -> Loc:
        """Where in the imported manifest the converted field at `loc` came from."""
        for n in range(len(loc), 0, -1):
            if loc[:n] in self.origins:
                return (*self.origins[loc[:n]], *loc[n:])
        return loc


def imported_path(path: str) -> str:
    """The field of an imported manifest that gave the Suanpan job's field at `path`."""
    for loc, key in FROM_ANNOTATIONS.items():
        if path == ".".join(loc):
            return f"metadata.annotations.{key}"
    return path


def annotated(
    document: dict[str, Any], images: Mapping[str, str], **notes: str | None
) -> dict[str, Any]:
    """An imported manifest with the import annotations set (a CLI's flags): images per vendor
    and `tenant`, `queue`, `priority_class` where given."""
    keys = {"tenant": TENANT, "queue": QUEUE, "priority_class": PRIORITY_CLASS}
    given = {keys[k]: v for k, v in notes.items() if v is not None}
    given |= {IMAGE_PREFIX + vendor: image for vendor, image in images.items()}
    metadata = dict(document.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **given}
    return {**document, "metadata": metadata}


def _replicas(spec: Mapping[str, Any]) -> object:
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    if isinstance(completions, int) and isinstance(parallelism, int) and parallelism < completions:
        raise CompileError(
            "spec.parallelism",
            "Suanpan starts every completion at once: parallelism below completions is not run",
            f"absent or >= {completions}",
        )
    return completions if completions is not None else parallelism if parallelism is not None else 1


PYTORCH_ROLES = (("Master", "master"), ("Worker", "worker"))


def to_manifest(catalog: Catalog, imported: KubernetesManifest) -> JobManifest:
    """The Suanpan job of a Kubernetes Job or PyTorchJob; raises CompileError or a
    ValidationError whose locations are the imported manifest's fields."""
    conversion = _Conversion(catalog, imported.metadata)
    name = imported.metadata.get("name")
    spec = imported.spec
    if imported.api_version == "batch/v1" and imported.kind == "Job":
        task = conversion.task(
            0, "main", _replicas(spec), spec.get("template"), ("spec", "template")
        )
        conversion.origins[("spec", "tasks", 0, "replicas")] = ("spec", "completions")
        return conversion.manifest(name, {"gang": False, "tasks": [task]})
    if imported.api_version == "kubeflow.org/v1" and imported.kind == "PyTorchJob":
        roles = _object(spec.get("pytorchReplicaSpecs"), ("spec", "pytorchReplicaSpecs"))
        unknown = sorted(set(roles) - {role for role, _ in PYTORCH_ROLES})
        if unknown or not roles:
            raise CompileError(
                f"spec.pytorchReplicaSpecs.{unknown[0]}" if unknown else "spec.pytorchReplicaSpecs",
                "a PyTorchJob has Master and Worker replica specs",
                "Master, Worker",
            )
        tasks: list[dict[str, Any]] = []
        for role, task_name in (r for r in PYTORCH_ROLES if r[0] in roles):
            at: Loc = ("spec", "pytorchReplicaSpecs", role)
            replica_spec = _object(roles[role], at)
            replicas = replica_spec.get("replicas", 1)
            template = replica_spec.get("template")
            tasks.append(
                conversion.task(len(tasks), task_name, replicas, template, (*at, "template"))
            )
        return conversion.manifest(name, {"gang": True, "tasks": tasks})
    raise CompileError(
        "kind", f"{imported.api_version} has no kind {imported.kind!r}", "Job or PyTorchJob"
    )
