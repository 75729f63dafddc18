"""Log requests and the relay of their chunks between hub replicas.

A client's replica records a request (`open_request`) and wakes the cluster's agent, which
takes it (`take`) on its own outbound long-poll and uploads the container's log to any
replica. That replica relays each piece as a NOTIFY on `LOGS` (`relay`), payload
`<request id>:<frame>`, the frame `o` (stream opened), `d<base64 bytes>`, `e` (end) or
`x<message>` (the agent could not open the log); PostgreSQL delivers them in commit order to
the replica holding the client. Chunks never touch a table. `close` marks a request whose
client left or whose stream ended; an upload of a closed request stops.
"""

from __future__ import annotations

import base64
import uuid

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.compiled import CompiledJob
from federation.store.listener import LOGS, PLACEMENTS, notify
from federation.store.tables import jobs, log_requests, placements
from federation.wire.logs import LogRequest

PIECE_BYTES = 4096  # raw bytes per NOTIFY: base64 keeps the payload under PostgreSQL's 8000
OPENED, DATA, END, FAILED = "o", "d", "e", "x"


async def open_request(conn: AsyncConnection, cluster_id: uuid.UUID, request: LogRequest) -> None:
    """Record a request and wake the cluster's agent (its long-poll listens on PLACEMENTS);
    requests older than a day (whatever became of them) are forgotten."""
    await conn.execute(
        log_requests.delete().where(log_requests.c.created_at < sa.text("now() - interval '1 day'"))
    )
    await conn.execute(
        log_requests.insert().values(
            id=request.id,
            cluster_id=cluster_id,
            job_id=request.job,
            request=request.model_dump(mode="json", by_alias=True),
        )
    )
    await notify(conn, PLACEMENTS, str(cluster_id))


async def latest_placement(
    conn: AsyncConnection, job_id: uuid.UUID
) -> tuple[uuid.UUID, int] | None:
    """The cluster and epoch of the job's latest placement (its pods, running or kept)."""
    row = (
        await conn.execute(
            sa.select(placements.c.cluster_id, placements.c.epoch)
            .where(placements.c.job_id == job_id)
            .order_by(placements.c.epoch.desc())
            .limit(1)
        )
    ).one_or_none()
    return None if row is None else (row.cluster_id, row.epoch)


async def job_tasks(conn: AsyncConnection, job_id: uuid.UUID) -> dict[str, int]:
    """The job's tasks in their order (the compiled job's, which owns it) with the most
    replicas each may hold (an elastic task's maximum: a replica it grew by has logs too)."""
    compiled = await conn.scalar(sa.select(jobs.c.compiled).where(jobs.c.id == job_id))
    if compiled is None:
        return {}
    return {t.name: t.ceiling for t in CompiledJob.model_validate(compiled).tasks}


async def take(conn: AsyncConnection, cluster_id: uuid.UUID) -> list[LogRequest]:
    """The cluster's pending requests, each handed out once (now `Streaming`)."""
    rows = await conn.execute(
        log_requests.update()
        .where(log_requests.c.cluster_id == cluster_id, log_requests.c.state == "Pending")
        .values(state="Streaming")
        .returning(log_requests.c.request)
    )
    return [LogRequest.model_validate(r.request) for r in rows]


async def streaming(conn: AsyncConnection, cluster_id: uuid.UUID, request_id: uuid.UUID) -> bool:
    """Whether the cluster's request is still being streamed (its client still waits)."""
    state = await conn.scalar(
        sa.select(log_requests.c.state).where(
            log_requests.c.id == request_id, log_requests.c.cluster_id == cluster_id
        )
    )
    return state == "Streaming"


async def close(conn: AsyncConnection, request_id: uuid.UUID) -> None:
    """The stream ended or its client left: an upload still running stops at its next piece."""
    await conn.execute(
        log_requests.update().where(log_requests.c.id == request_id).values(state="Closed")
    )


async def relay(conn: AsyncConnection, request_id: uuid.UUID, frame: str) -> None:
    """Send one frame to the replica holding the request's client (at commit)."""
    await notify(conn, LOGS, f"{request_id}:{frame}")


def data_frames(chunk: bytes) -> list[str]:
    """The `DATA` frames of a chunk of log bytes."""
    return [
        DATA + base64.b64encode(chunk[i : i + PIECE_BYTES]).decode()
        for i in range(0, len(chunk), PIECE_BYTES)
    ]


def frame_bytes(frame: str) -> bytes:
    """The log bytes of a `DATA` frame."""
    return base64.b64decode(frame[1:])
