"""What a tenant's pod templates may ask of the nodes (pure): host paths, host network and
privileged containers are refused unless an administrator allows them for the tenant."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from federation.compiled import CompiledJob


class TenantPolicy(BaseModel):
    """A tenant's policy (stored with the tenant; the defaults forbid)."""

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    allow_host_path: bool = Field(default=False, alias="allowHostPath")
    allow_host_network: bool = Field(default=False, alias="allowHostNetwork")
    allow_privileged: bool = Field(default=False, alias="allowPrivileged")


def violations(policy: TenantPolicy, job: CompiledJob) -> list[tuple[str, str]]:
    """Per forbidden field of the job's templates: its manifest path and why."""
    found: list[tuple[str, str]] = []
    for i, task in enumerate(job.tasks):
        at = f"spec.tasks[{i}].template.spec"
        spec = task.pod.spec
        if spec.host_network and not policy.allow_host_network:
            found.append((f"{at}.hostNetwork", "the tenant's policy forbids host network"))
        for j, volume in enumerate(spec.volumes or []):
            if volume.host_path is not None and not policy.allow_host_path:
                found.append(
                    (f"{at}.volumes[{j}].hostPath", "the tenant's policy forbids hostPath")
                )
        if policy.allow_privileged:
            continue
        for group, containers in (
            ("containers", spec.containers),
            ("initContainers", spec.init_containers or []),
        ):
            found += [
                (
                    f"{at}.{group}[{k}].securityContext.privileged",
                    "the tenant's policy forbids privileged containers",
                )
                for k, c in enumerate(containers)
                if c.security_context and c.security_context.privileged
            ]
    return found
