"""Jobs: submit, read, list, cancel, events, explain."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from api.auth import tenant_scope
from api.context import ctx
from api.problems import invalid, problem_body
from api.registry import HEADER_PATTERN, WRITERS, Call, Reply
from api.routes import API
from api.routes.common import event_out, job_out, parse_id, replica_out
from api.schemas import (
    BatchOutcome,
    ClusterReason,
    ElasticTaskOut,
    EventList,
    EventQuery,
    Explanation,
    JobBatch,
    JobBatchResult,
    JobDetail,
    JobList,
    JobOut,
    JobQuery,
)
from federation.compiled import CompiledJob, JobFacts, core_job
from federation.compiler import CompileError, compile_job
from federation.errors import FieldError, InvalidInput, NotFound, SuanpanError, Unrunnable
from federation.imports import KubernetesManifest, Submission, imported_path, to_manifest
from federation.spec import JobManifest
from federation.store import jobs as job_store
from federation.store import replicas as replica_store
from federation.store import tenancy
from federation.store.tenancy import SubmissionTarget
from federation.tenant_policy import TenantPolicy, violations

IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY = re.compile(HEADER_PATTERN.strip("^$"))


async def _target(call: Call, manifest: JobManifest) -> SubmissionTarget:
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


async def _resolve(call: Call, manifest: JobManifest) -> SubmissionTarget:
    """The submission target read from the database; a precise error if it is incomplete."""
    who = call.who
    named = manifest.metadata.tenant
    async with ctx(call.request).db.connection() as conn:
        target = await tenancy.submission_target(
            conn,
            tenant_id=who.tenant_id,
            tenant_name=named,
            queue=manifest.spec.queue,
            priority_class_name=manifest.spec.priority_class,
        )
    if target is None:
        raise InvalidInput(
            f"no tenant named {named!r}",
            [FieldError("metadata.tenant", f"no tenant named {named!r}", "an existing tenant")],
        )
    if who.tenant_id is not None and named is not None and named != target.tenant:
        raise NotFound("tenant", named)
    if target.queue_id is None:
        raise InvalidInput(
            f"no queue {manifest.spec.queue!r} in tenant {target.tenant!r}",
            [FieldError("spec.queue", "no such queue in this tenant", "an existing queue")],
        )
    if target.priority is None:
        raise InvalidInput(
            f"no priority class {manifest.spec.priority_class!r}",
            [
                FieldError(
                    "spec.priorityClass", "unknown priority class", "see /v1/priority-classes"
                )
            ],
        )
    return target


def _compile(call: Call, manifest: JobManifest) -> CompiledJob:
    """The manifest compiled against the hub's catalog; a 422 naming the field otherwise."""
    try:
        return compile_job(ctx(call.request).catalog, manifest)
    except CompileError as exc:
        raise InvalidInput(str(exc), [FieldError(exc.path, exc.message, exc.expected)]) from exc


def _imported(call: Call, submitted: JobManifest | KubernetesManifest) -> JobManifest:
    """The Suanpan job of a submission: imported manifests converted, errors at their fields."""
    if isinstance(submitted, JobManifest):
        return submitted
    try:
        return to_manifest(ctx(call.request).catalog, submitted)
    except CompileError as exc:
        raise InvalidInput(str(exc), [FieldError(exc.path, exc.message, exc.expected)]) from exc
    except ValidationError as exc:
        raise invalid(exc, "imported manifest") from exc


def _check_policy(policy: TenantPolicy, compiled: CompiledJob) -> None:
    """Refuse what the tenant's policy forbids, naming each field."""
    found = violations(policy, compiled)
    if found:
        raise InvalidInput(
            f"{found[0][0]}: {found[0][1]}",
            [FieldError(path, why, "allowed by the tenant's policy") for path, why in found],
        )


async def _check_runnable(
    call: Call, manifest: JobManifest, compiled: CompiledJob, queue: str, priority: int
) -> None:
    """Refuse jobs no cluster of the fleet could ever run."""
    facts = JobFacts(
        id="submission", queue=queue, priority=priority, preemptible=False, created_at=0
    )
    rejected = await ctx(call.request).fleet_check.rejection(core_job(compiled, facts))
    if rejected is not None:
        raise Unrunnable(
            {cluster: str(status) for cluster, status in rejected.reasons.items()},
            manifest.metadata.name,
        )


@API.op(
    "POST",
    "/v1/jobs",
    summary="Submit a job",
    tag="jobs",
    roles=WRITERS,
    body=Submission,
    response=JobOut,
    status=201,
    errors=(404, 409, 413),
    headers=(IDEMPOTENCY_HEADER,),
)
async def submit_job(call: Call) -> Reply:
    """Queue a job (a Suanpan job, or a Kubernetes Job or Kubeflow PyTorchJob, converted);
    with `Idempotency-Key`, a retry returns the first job (200)."""
    submitted = call.body_as(Submission).root
    manifest = _imported(call, submitted)
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
    try:
        new = await _prepare(call, manifest, key)
    except InvalidInput as exc:
        if isinstance(submitted, JobManifest):
            raise
        errors = [replace(e, path=imported_path(e.path)) for e in exc.errors]
        raise InvalidInput(exc.detail, errors) from exc
    job, created = await ctx(call.request).submissions.submit(new)
    return Reply(201 if created else 200, job_out(job), {"Location": f"/v1/jobs/{job.id}"})


def _digest(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


async def _prepare(call: Call, manifest: JobManifest, key: str | None) -> job_store.NewJob:
    """What the store needs to queue a validated manifest: compiled, its tenant, queue and
    priority resolved, refused if no cluster could ever run it."""
    spec = manifest.model_dump(mode="json", by_alias=True, exclude_none=True)
    # a repeat of an idempotency key is told from a conflicting reuse by the body's digest
    digest = _digest(spec) if key is not None else None
    compiled = _compile(call, manifest)
    target = await _target(call, manifest)
    assert target.queue_id is not None and target.priority is not None
    _check_policy(TenantPolicy.model_validate(target.policy), compiled)
    await _check_runnable(
        call, manifest, compiled, f"{target.tenant}/{manifest.spec.queue}", target.priority
    )
    return job_store.NewJob(
        tenant_id=target.tenant_id,
        tenant=target.tenant,
        queue_id=target.queue_id,
        queue=manifest.spec.queue,
        name=manifest.metadata.name,
        labels=manifest.metadata.labels,
        spec=spec,
        compiled=compiled.model_dump(mode="json", by_alias=True),
        priority=target.priority,
        priority_class=manifest.spec.priority_class,
        preemptible=(
            manifest.spec.preemptible
            if manifest.spec.preemptible is not None
            else target.preemptible_default
        ),
        tasks=[(t.name, t.replicas) for t in compiled.tasks],
        idempotency_key=key,
        request_hash=digest,
    )


@API.op(
    "POST",
    "/v1/job-batches",
    summary="Submit many jobs",
    tag="jobs",
    roles=WRITERS,
    body=JobBatch,
    response=JobBatchResult,
    status=200,
    errors=(413,),
)
async def submit_batch(call: Call) -> Reply:
    """Queue up to 1,000 jobs in one request, each with its own idempotency key: every item is
    accepted (201, or 200 for a repeat of its key) or refused with its own problem document,
    whatever the others do; all accepted ones are written in one transaction."""
    batch = call.body_as(JobBatch)
    outcomes: list[BatchOutcome | None] = []
    news: list[job_store.NewJob] = []
    for item in batch.items:
        await asyncio.sleep(0)  # let other requests (agents' lease renewals) run between items
        try:
            manifest = JobManifest.model_validate_json(json.dumps(item.manifest), strict=True)
        except ValidationError as exc:
            outcomes.append(_refused(invalid(exc, "manifest")))
            continue
        try:
            news.append(await _prepare(call, manifest, item.idempotency_key))
        except SuanpanError as exc:
            outcomes.append(_refused(exc))
            continue
        outcomes.append(None)
    async with ctx(call.request).db.transaction() as conn:
        results = iter(await job_store.submit_many(conn, news))
    items = []
    for outcome in outcomes:
        if outcome is None:
            result = next(results)
            outcome = (
                _refused(result)
                if isinstance(result, SuanpanError)
                else BatchOutcome(status=201 if result[1] else 200, job=job_out(result[0]))
            )
        items.append(outcome)
    return Reply(200, JobBatchResult(items=items))


def _refused(exc: SuanpanError) -> BatchOutcome:
    return BatchOutcome(status=exc.status, problem=problem_body(exc))


@API.op(
    "GET", "/v1/jobs/{job_id}", summary="Get a job", tag="jobs", response=JobDetail, errors=(404,)
)
async def get_job(call: Call) -> Reply:
    """One job, with each replica's status as its cluster last reported it and its attempts."""
    job_id = parse_id("job", call.path("job_id"))
    async with ctx(call.request).db.connection() as conn:
        job = await job_store.get(conn, job_id, tenant_scope(call.who))
        found, attempts = await replica_store.of_job(conn, job_id, job.epoch)
        sizes = await job_store.elastic_sizes(conn, job_id, job.epoch)
    out = job_out(job).model_dump(by_alias=False)
    elastic = [
        ElasticTaskOut(
            task=e.task,
            replicas=e.replicas,
            min_replicas=e.min_replicas,
            max_replicas=e.max_replicas,
        )
        for e in sizes
    ]
    return Reply(
        200,
        JobDetail(
            **out,
            attempts=attempts,
            replicas=[replica_out(r) for r in found],
            elastic=elastic,
        ),
    )


@API.op(
    "GET",
    "/v1/jobs",
    summary="List jobs",
    tag="jobs",
    query=JobQuery,
    response=JobList,
    errors=(404,),
)
async def list_jobs(call: Call) -> Reply:
    """Jobs newest first, filtered, with cursor pagination."""
    q = call.query_as(JobQuery)
    scope = tenant_scope(call.who)
    async with ctx(call.request).db.connection() as conn:
        tenant_id = scope
        if q.tenant is not None:
            tenant = await tenancy.get_tenant(conn, q.tenant)
            if scope is not None and tenant.id != scope:
                raise NotFound("tenant", q.tenant)
            tenant_id = tenant.id
        flt = job_store.JobFilter(
            tenant_id=tenant_id,
            queue=q.queue,
            states=tuple(q.state.split(",")) if q.state else (),
            labels=tuple(
                (key, value)
                for key, _, value in (pair.partition("=") for pair in (q.label or "").split(","))
                if key
            ),
            vendor=q.vendor,
            cluster=q.cluster,
        )
        page, cursor = await job_store.list_jobs(conn, flt, limit=q.limit, cursor=q.cursor)
    return Reply(200, JobList(items=[job_out(j) for j in page], next_cursor=cursor))


@API.op(
    "POST",
    "/v1/jobs/{job_id}/cancel",
    summary="Cancel a job",
    tag="jobs",
    roles=WRITERS,
    response=JobOut,
    errors=(404, 409),
)
async def cancel_job(call: Call) -> Reply:
    """Cancel a job (idempotent); its pods are deleted by the cluster's agent."""
    job_id = parse_id("job", call.path("job_id"))
    async with ctx(call.request).db.transaction() as conn:
        job = await job_store.cancel(conn, job_id, tenant_scope(call.who))
    return Reply(200, job_out(job))


@API.op(
    "POST",
    "/v1/jobs/{job_id}/checkpoint",
    summary="Report a checkpoint",
    tag="jobs",
    roles=WRITERS,
    response=JobOut,
    errors=(404, 409),
)
async def report_checkpoint(call: Call) -> Reply:
    """Record that the job has just saved its work (the hub's clock stamps it): preemption
    then counts only the work done since, so a job that checkpointed is evicted first among
    equals. Call it from the job (or its launcher) after each checkpoint is durable."""
    job_id = parse_id("job", call.path("job_id"))
    async with ctx(call.request).db.transaction() as conn:
        job = await job_store.checkpointed(conn, job_id, tenant_scope(call.who))
    return Reply(200, job_out(job))


@API.op(
    "GET",
    "/v1/jobs/{job_id}/events",
    summary="List a job's events",
    tag="jobs",
    query=EventQuery,
    response=EventList,
    errors=(404,),
)
async def job_events(call: Call) -> Reply:
    """Events of a job, oldest first."""
    job_id = parse_id("job", call.path("job_id"))
    q = call.query_as(EventQuery)
    async with ctx(call.request).db.connection() as conn:
        await job_store.get(conn, job_id, tenant_scope(call.who))
        found = await job_store.job_events(conn, job_id, after=q.after, limit=q.limit)
    return Reply(200, EventList(items=[event_out(e) for e in found]))


@API.op(
    "GET",
    "/v1/jobs/{job_id}/explain",
    summary="Explain a job's placement",
    tag="jobs",
    response=Explanation,
    errors=(404,),
)
async def explain_job(call: Call) -> Reply:
    """Why the job is where it is; for a waiting job, the first failing check per cluster."""
    job_id = parse_id("job", call.path("job_id"))
    async with ctx(call.request).db.connection() as conn:
        job = await job_store.get(conn, job_id, tenant_scope(call.who))
    reasons = [
        ClusterReason(cluster=name, code=str(r.get("code", "")), reason=str(r.get("reason", "")))
        for name, r in sorted(job.pending_reasons.items())
    ]
    if job.state == "Queued":
        summary = job.reason or "waiting for the next scheduling cycle"
    elif job.cluster:
        summary = f"{job.state} on cluster {job.cluster}: {job.reason}"
    else:
        summary = f"{job.state}: {job.reason}"
    return Reply(200, Explanation(job=job.id, state=job.state, summary=summary, clusters=reasons))
