"""Container logs: a client's request relayed to the cluster's agent and its bytes back.

The hub never dials into a cluster: the agent takes requests on its own long-poll
(`GET /v1/agent/logs`) and uploads each stream to any replica (`POST /v1/agent/logs/{id}`);
chunks reach the replica holding the client over NOTIFY (federation/store/logs.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Annotated

from aiohttp import web
from pydantic import BeforeValidator, Field

from api.auth import tenant_scope
from api.context import ctx
from api.registry import Call, Reply
from api.routes import API
from api.routes.agent import AGENT
from api.routes.common import parse_id
from api.schemas import QueryFloat, QueryInt, _In
from federation.errors import FieldError, InvalidInput, NotFound, SuanpanError
from federation.k8s_names import DnsLabel
from federation.store import jobs as job_store
from federation.store import logs as log_store
from federation.store.listener import LOGS, PLACEMENTS
from federation.validation import INT32_MAX
from federation.wire.logs import MAX_LOG_BYTES, LogFailure, LogRequest, LogRequestBatch

DEFAULT_LOG_BYTES = 1 << 20
OPEN_TIMEOUT_S = 30.0  # an agent that does not start streaming by then is not coming
CLIENT_CHECK_S = 1.0  # how often a quiet stream checks that its client is still there


def _query_bool(value: object) -> object:
    if isinstance(value, str):
        if value not in ("true", "false"):
            raise ValueError("must be true or false")
        return value == "true"
    return value


class LogQuery(_In):
    """Which container's log, how much of it, and whether to follow it."""

    task: DnsLabel | None = None  # default: the job's first task
    replica: QueryInt = Field(default=0, ge=0, le=INT32_MAX)
    container: DnsLabel | None = None  # default: the pod's first container
    follow: Annotated[bool, BeforeValidator(_query_bool)] = False
    tail: QueryInt | None = Field(default=None, ge=0, le=INT32_MAX)
    limit_bytes: QueryInt = Field(
        default=DEFAULT_LOG_BYTES, ge=1, le=MAX_LOG_BYTES, alias="limitBytes"
    )


class AgentLogQuery(_In):
    """How long to hold the agent's poll when no request waits."""

    wait: QueryFloat = Field(default=0, ge=0, le=60)


class LogUnavailable(SuanpanError):
    """The job has no pod whose log could be read (not placed yet, or the pod is gone)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail, 409, "No log to read", "no-log")


async def _request(call: Call) -> tuple[uuid.UUID, LogRequest]:
    """The cluster to ask and the request, after the tenant check and the query's."""
    job_id = parse_id("job", call.path("job_id"))
    q = call.query_as(LogQuery)
    async with ctx(call.request).db.connection() as conn:
        job = await job_store.get(conn, job_id, tenant_scope(call.who))
        placed = await log_store.latest_placement(conn, job_id)
        tasks = await log_store.job_tasks(conn, job_id)
    task = q.task or next(iter(tasks))
    if task not in tasks:
        raise InvalidInput(
            f"job has no task {task!r}",
            [FieldError("query.task", "no such task in this job", ", ".join(tasks))],
        )
    if q.replica >= tasks[task]:
        raise InvalidInput(
            f"task {task!r} has {tasks[task]} replicas",
            [FieldError("query.replica", "out of range", f"0 to {tasks[task] - 1}")],
        )
    if placed is None:
        raise LogUnavailable(f"job {job.name!r} is {job.state} and has never had a pod")
    cluster_id, epoch = placed
    return cluster_id, LogRequest(
        id=uuid.uuid4(),
        job=job_id,
        epoch=epoch,
        task=task,
        replica=q.replica,
        container=q.container or "",
        follow=q.follow,
        tail=q.tail,
        limit_bytes=q.limit_bytes,
    )


def _client_gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


async def _first_frame(call: Call, frames: asyncio.Queue[str]) -> str:
    """The agent's first frame: opened, or why it could not open the log."""
    deadline = time.monotonic() + OPEN_TIMEOUT_S
    while time.monotonic() < deadline and not _client_gone(call.request):
        try:
            return await asyncio.wait_for(frames.get(), CLIENT_CHECK_S)
        except TimeoutError:
            continue
    raise LogUnavailable("the cluster's agent did not start streaming in time (is it connected?)")


@API.op(
    "GET",
    "/v1/jobs/{job_id}/logs",
    summary="Stream a replica's container log",
    tag="jobs",
    query=LogQuery,
    errors=(404, 409),
)
async def job_logs(call: Call) -> web.StreamResponse:
    """The log of one container of one replica (`text/plain`), read from its cluster by the
    agent; with `follow`, streamed until the container ends or the client leaves."""
    cluster_id, wanted = await _request(call)
    hub = ctx(call.request)
    if hub.listener is None:
        raise LogUnavailable("the hub is starting; retry")
    try:
        async with hub.listener.subscribe(LOGS, str(wanted.id)) as frames:
            async with hub.db.transaction() as conn:
                await log_store.open_request(conn, cluster_id, wanted)
            try:
                return await _relay(call, frames)
            finally:
                async with hub.db.transaction() as conn:
                    await log_store.close(conn, wanted.id)
    except ConnectionError as exc:
        raise LogUnavailable(f"the log relay is unavailable: {exc}") from exc


async def _relay(call: Call, frames: asyncio.Queue[str]) -> web.StreamResponse:
    first = await _first_frame(call, frames)
    if first.startswith(log_store.FAILED):
        raise LogUnavailable(first[1:])
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    await response.prepare(call.request)
    while not _client_gone(call.request):
        try:
            frame = await asyncio.wait_for(frames.get(), CLIENT_CHECK_S)
        except TimeoutError:
            continue
        if frame.startswith(log_store.DATA):
            await response.write(log_store.frame_bytes(frame))
        elif frame == log_store.END or frame.startswith(log_store.FAILED):
            break
    await response.write_eof()
    return response


# --- the agent's side -----------------------------------------------------------------------


@API.op(
    "GET",
    "/v1/agent/logs",
    summary="Wait for log requests",
    tag="agent",
    roles=AGENT,
    query=AgentLogQuery,
    response=LogRequestBatch,
    errors=(404,),
)
async def agent_log_requests(call: Call) -> Reply:
    """Log requests for the token's cluster not handed out before; holds the request up to
    `wait` s while there are none."""
    assert call.who.cluster_id is not None
    hub = ctx(call.request)
    deadline = time.monotonic() + call.query_as(AgentLogQuery).wait
    while True:
        async with hub.db.transaction() as conn:
            items = await log_store.take(conn, call.who.cluster_id)
        left = deadline - time.monotonic()
        if items or left <= 0 or hub.listener is None:
            return Reply(200, LogRequestBatch(items=items))
        await hub.listener.wait(PLACEMENTS, str(call.who.cluster_id), seconds=min(left, 5.0))


async def _streaming(call: Call, request_id: uuid.UUID) -> None:
    assert call.who.cluster_id is not None
    async with ctx(call.request).db.connection() as conn:
        if not await log_store.streaming(conn, call.who.cluster_id, request_id):
            raise NotFound("log request", str(request_id))


@API.op(
    "POST",
    "/v1/agent/logs/{request_id}",
    summary="Upload a log stream",
    tag="agent",
    roles=AGENT,
    errors=(404,),
)
async def agent_log_upload(call: Call) -> Reply:
    """The request's log bytes as the body (streamed, chunked), relayed as they arrive; the
    end of the body ends the client's stream. Answers 404 once the client has left (the agent
    stops), else 204 at the end."""
    assert call.who.cluster_id is not None
    cluster_id = call.who.cluster_id
    request_id = parse_id("log request", call.path("request_id"))
    await _streaming(call, request_id)
    db = ctx(call.request).db
    async with db.transaction() as conn:
        await log_store.relay(conn, request_id, log_store.OPENED)
    content = call.request.content
    while True:
        try:
            chunk = await asyncio.wait_for(content.readany(), CLIENT_CHECK_S)
        except TimeoutError:
            await _streaming(call, request_id)  # a quiet stream whose client left stops
            continue
        async with db.transaction() as conn:
            if not chunk:
                await log_store.relay(conn, request_id, log_store.END)
                await log_store.close(conn, request_id)
                return Reply(204)
            if not await log_store.streaming(conn, cluster_id, request_id):
                raise NotFound("log request", str(request_id))
            for frame in log_store.data_frames(chunk):
                await log_store.relay(conn, request_id, frame)


@API.op(
    "POST",
    "/v1/agent/logs/{request_id}/failure",
    summary="Say why a log cannot be streamed",
    tag="agent",
    roles=AGENT,
    body=LogFailure,
    errors=(404,),
    status=204,
)
async def agent_log_failure(call: Call) -> Reply:
    """The agent cannot open the request's log (no such pod or container): the client gets a
    409 saying so."""
    request_id = parse_id("log request", call.path("request_id"))
    await _streaming(call, request_id)
    async with ctx(call.request).db.transaction() as conn:
        await log_store.relay(conn, request_id, log_store.FAILED + call.body_as(LogFailure).message)
        await log_store.close(conn, request_id)
    return Reply(204)
