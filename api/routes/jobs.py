"""Jobs: submit, read, list, cancel, events, explain."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

from pydantic import ValidationError

from api.auth import tenant_scope
from api.context import ctx
from api.problems import invalid, problem_body
from api.registry import WRITERS, Call, Reply
from api.routes import API
from api.routes.common import event_out, job_out, listed_tenant, parse_id, replica_out
from api.routes.submission import (
    check_admissible,
    compile_failed,
    digest,
    idempotency_key,
    preemptible,
    target,
)
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
from federation.compiler import CompileError, compile_job
from federation.errors import InvalidInput, SuanpanError
from federation.imports import KubernetesManifest, Submission, imported_path, to_manifest
from federation.spec import JobManifest
from federation.store import jobs as job_store
from federation.store import replicas as replica_store
from federation.wire.http import IDEMPOTENCY_HEADER


def _imported(call: Call, submitted: JobManifest | KubernetesManifest) -> JobManifest:
    """The Suanpan job of a submission: imported manifests converted, errors at their fields."""
    if isinstance(submitted, JobManifest):
        return submitted
    try:
        return to_manifest(ctx(call.request).catalog, submitted)
    except CompileError as exc:
        raise compile_failed(exc) from exc
    except ValidationError as exc:
        raise invalid(exc, "imported manifest") from exc


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
    key = idempotency_key(call)
    try:
        new = await _prepare(call, manifest, key)
    except InvalidInput as exc:
        if isinstance(submitted, JobManifest):
            raise
        errors = [replace(e, path=imported_path(e.path)) for e in exc.errors]
        raise InvalidInput(exc.detail, errors) from exc
    job, created = await ctx(call.request).submissions.submit(new)
    return Reply(201 if created else 200, job_out(job), {"Location": f"/v1/jobs/{job.id}"})


async def _prepare(call: Call, manifest: JobManifest, key: str | None) -> job_store.NewJob:
    """What the store needs to queue a validated manifest: compiled, its tenant, queue and
    priority resolved, refused if no cluster could ever run it."""
    spec = manifest.model_dump(mode="json", by_alias=True, exclude_none=True)
    try:
        compiled = compile_job(ctx(call.request).catalog, manifest)
    except CompileError as exc:
        raise compile_failed(exc) from exc
    found = await target(call, manifest)
    assert found.queue_id is not None and found.priority is not None
    await check_admissible(call, manifest, compiled, found)
    return job_store.NewJob(
        tenant_id=found.tenant_id,
        tenant=found.tenant,
        queue_id=found.queue_id,
        queue=manifest.spec.queue,
        name=manifest.metadata.name,
        labels=manifest.metadata.labels,
        spec=spec,
        compiled=compiled.model_dump(mode="json", by_alias=True),
        priority=found.priority,
        priority_class=manifest.spec.priority_class,
        preemptible=preemptible(manifest, found),
        tasks=[(t.name, t.replicas) for t in compiled.tasks],
        idempotency_key=key,
        request_hash=digest(spec) if key is not None else None,
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
    async with ctx(call.request).db.connection() as conn:
        flt = job_store.JobFilter(
            tenant_id=await listed_tenant(conn, call.who, q.tenant),
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
