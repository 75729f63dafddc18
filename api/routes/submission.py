"""What submitting a job and a service share: the idempotency key and the body's digest, the
tenant, queue and priority class resolved, the tenant's policy and the fleet's fail-fast check."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from api.context import ctx
from api.registry import HEADER_PATTERN, Call
from federation.compiled import CompiledJob, JobFacts, core_job
from federation.compiler import CompileError
from federation.errors import FieldError, InvalidInput, NotFound, Unrunnable
from federation.spec import JobManifest, ServiceManifest
from federation.store import tenancy
from federation.store.tenancy import SubmissionTarget
from federation.tenant_policy import TenantPolicy, violations
from federation.wire.http import IDEMPOTENCY_HEADER

IDEMPOTENCY_KEY = re.compile(HEADER_PATTERN.strip("^$"))
Manifest = JobManifest | ServiceManifest


def idempotency_key(call: Call) -> str | None:
    """The request's `Idempotency-Key`, if given; a malformed one is invalid input."""
    key = call.request.headers.get(IDEMPOTENCY_HEADER)
    if key is not None and IDEMPOTENCY_KEY.fullmatch(key) is None:
        raise InvalidInput(
            f"{IDEMPOTENCY_HEADER} must be 1 to 128 printable ASCII characters",
            [
                FieldError(
                    f"header.{IDEMPOTENCY_HEADER}",
                    "must be 1 to 128 printable ASCII characters, no space",
                    f"matches {HEADER_PATTERN}",
                )
            ],
        )
    return key


def digest(spec: dict[str, Any]) -> str:
    """The digest of a submitted body: a repeat of an idempotency key is told from a
    conflicting reuse by it."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


async def target(call: Call, manifest: Manifest) -> SubmissionTarget:
    """Tenant, queue and priority class of a submission (resolved recently, or now), each
    missing one a precise error."""
    who = call.who
    named = manifest.metadata.tenant
    if who.tenant_id is None and named is None:
        raise InvalidInput(
            "metadata.tenant is required for tokens not bound to a tenant",
            [FieldError("metadata.tenant", "required for admin tokens", "a tenant name")],
        )
    key = (who.tenant_id, named, manifest.spec.queue, manifest.spec.priority_class)
    return await ctx(call.request).targets.get(key, lambda: _resolve(call, manifest))


async def _resolve(call: Call, manifest: Manifest) -> SubmissionTarget:
    """The submission target read from the database; a precise error if it is incomplete."""
    who = call.who
    named = manifest.metadata.tenant
    async with ctx(call.request).db.connection() as conn:
        found = await tenancy.submission_target(
            conn,
            tenant_id=who.tenant_id,
            tenant_name=named,
            queue=manifest.spec.queue,
            priority_class_name=manifest.spec.priority_class,
        )
    if found is None:
        raise InvalidInput(
            f"no tenant named {named!r}",
            [FieldError("metadata.tenant", f"no tenant named {named!r}", "an existing tenant")],
        )
    if who.tenant_id is not None and named is not None and named != found.tenant:
        raise NotFound("tenant", named)
    if found.queue_id is None:
        raise InvalidInput(
            f"no queue {manifest.spec.queue!r} in tenant {found.tenant!r}",
            [FieldError("spec.queue", "no such queue in this tenant", "an existing queue")],
        )
    if found.priority is None:
        raise InvalidInput(
            f"no priority class {manifest.spec.priority_class!r}",
            [
                FieldError(
                    "spec.priorityClass", "unknown priority class", "see /v1/priority-classes"
                )
            ],
        )
    return found


def compile_failed(exc: CompileError) -> InvalidInput:
    """The 422 of a manifest the catalog cannot compile, naming the field."""
    return InvalidInput(str(exc), [FieldError(exc.path, exc.message, exc.expected)])


def preemptible(manifest: Manifest, found: SubmissionTarget) -> bool:
    """Whether the submission may be preempted: as it says, else its priority class's default."""
    given = manifest.spec.preemptible
    return given if given is not None else found.preemptible_default


async def check_admissible(
    call: Call, manifest: Manifest, compiled: CompiledJob, found: SubmissionTarget
) -> None:
    """Refuse what the tenant's policy forbids (naming each field) and what no cluster of the
    fleet could ever run."""
    refused = violations(TenantPolicy.model_validate(found.policy), compiled)
    if refused:
        raise InvalidInput(
            f"{refused[0][0]}: {refused[0][1]}",
            [FieldError(path, why, "allowed by the tenant's policy") for path, why in refused],
        )
    assert found.priority is not None
    facts = JobFacts(
        id="submission",
        queue=f"{found.tenant}/{manifest.spec.queue}",
        priority=found.priority,
        preemptible=False,
        created_at=0,
    )
    rejected = await ctx(call.request).fleet_check.rejection(core_job(compiled, facts))
    if rejected is not None:
        raise Unrunnable(
            {cluster: str(status) for cluster, status in rejected.reasons.items()},
            manifest.metadata.name,
        )
