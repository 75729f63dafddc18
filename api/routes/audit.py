"""The audit trail: administrators read every record, a tenant's members their tenant's."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AwareDatetime, BeforeValidator, Field, StringConstraints

from api.auth import tenant_scope
from api.context import ctx
from api.registry import READERS, Call, Reply
from api.routes import API
from api.schemas import QueryInt, _In, _Out
from federation.k8s_names import DnsLabel
from federation.store import audit

OUTCOME = r"^[1-5]([0-9]{2}|xx)$"


def _query_time(value: object) -> object:
    """A query parameter's text as an RFC 3339 time (with its offset)."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return value
    return value


QueryTime = Annotated[AwareDatetime, BeforeValidator(_query_time)]


class AuditQuery(_In):
    """Filters and paging of the audit trail."""

    actor: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    tenant: DnsLabel | None = None
    action: Annotated[str, StringConstraints(min_length=1, max_length=96)] | None = None
    outcome: Annotated[str, StringConstraints(pattern=OUTCOME)] | None = Field(
        default=None, description="a status code (403) or a class of them (4xx)"
    )
    since: QueryTime | None = None
    until: QueryTime | None = None
    limit: QueryInt = Field(default=100, ge=1, le=1000)
    cursor: Annotated[str, StringConstraints(max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] | None = (
        None
    )


class AuditOut(_Out):
    """One audited request."""

    id: int
    at: datetime
    actor: str | None
    role: str | None
    tenant: str | None
    action: str
    object: str | None
    request_id: str = Field(alias="requestId")
    source: str
    status: int


class AuditList(_Out):
    """A page of audit records, newest first."""

    items: list[AuditOut]
    next_cursor: str | None = Field(alias="nextCursor")


@API.op(
    "GET",
    "/v1/audit",
    summary="Read the audit trail",
    tag="audit",
    roles=READERS,
    query=AuditQuery,
    response=AuditList,
)
async def read_audit(call: Call) -> Reply:
    """Audited requests newest first, filtered; a tenant's members and viewers see only the
    records filed under their tenant."""
    q = call.query_as(AuditQuery)
    low, high = 0, 999
    if q.outcome is not None and q.outcome.endswith("xx"):
        low = int(q.outcome[0]) * 100
        high = low + 99
    elif q.outcome is not None:
        low = high = int(q.outcome)
    flt = audit.AuditFilter(
        tenant_id=tenant_scope(call.who),
        tenant=q.tenant,
        actor=q.actor,
        action=q.action,
        status_from=low,
        status_to=high,
        since=q.since,
        until=q.until,
    )
    async with ctx(call.request).db.connection() as conn:
        page, cursor = await audit.read(conn, flt, limit=q.limit, cursor=q.cursor)
    return Reply(
        200,
        AuditList(
            items=[AuditOut.model_validate(e, from_attributes=True) for e in page],
            next_cursor=cursor,
        ),
    )
