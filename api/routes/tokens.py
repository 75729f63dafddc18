"""API tokens: issue, rotate and revoke (admin only), and who the caller is."""

from __future__ import annotations

from api.auth import TOKENS
from api.context import ctx
from api.registry import ADMIN, Call, Reply
from api.routes import API
from api.routes.common import parse_id
from api.schemas import TokenIn, TokenList, TokenOut, TokenRotateIn, Whoami
from federation.errors import FieldError, InvalidInput
from federation.store import registration, tenancy, tokens


@API.op(
    "POST",
    "/v1/tokens",
    summary="Issue a token",
    tag="tokens",
    roles=ADMIN,
    body=TokenIn,
    response=TokenOut,
    status=201,
    errors=(404,),
)
async def issue_token(call: Call) -> Reply:
    """Issue a token valid for `ttlSeconds` (default 90 days); its secret is in this response
    only.

    A member token needs `tenant`; an agent token needs `cluster` (registered as Pending
    if new, and accepted: an administrator issued its credential), and can write nothing
    but its own cluster's inventory and status.
    """
    body = call.body_as(TokenIn)
    if body.role == "member" and body.tenant is None:
        raise InvalidInput(
            "a member token needs a tenant", [FieldError("tenant", "required for role member")]
        )
    if body.role == "agent" and body.cluster is None:
        raise InvalidInput(
            "an agent token needs a cluster", [FieldError("cluster", "required for role agent")]
        )
    async with ctx(call.request).db.transaction() as conn:
        tenant_id = (await tenancy.get_tenant(conn, body.tenant)).id if body.tenant else None
        cluster_id = (
            await registration.accept(conn, body.cluster, by="agent token", create=True)
            if body.role == "agent" and body.cluster
            else None
        )
        info, clear = await tokens.issue(
            conn,
            name=body.name,
            role=body.role,
            tenant_id=tenant_id,
            cluster_id=cluster_id,
            ttl_s=body.ttl_seconds,
        )
    return Reply(201, _out(info, clear), {"Location": f"/v1/tokens/{info.id}"})


def _out(info: tokens.TokenInfo, clear: str | None = None) -> TokenOut:
    return TokenOut(
        id=info.id,
        name=info.name,
        role=info.role,
        token=clear,
        expires_at=info.expires_at,
        revoked_at=info.revoked_at,
        rotated_from=info.rotated_from,
    )


@API.op("GET", "/v1/tokens", summary="List tokens", tag="tokens", roles=ADMIN, response=TokenList)
async def list_tokens(call: Call) -> Reply:
    """Issued tokens without their secrets."""
    async with ctx(call.request).db.connection() as conn:
        rows = await tokens.list_tokens(conn)
    return Reply(
        200,
        TokenList(items=[_out(r) for r in rows]),
    )


@API.op(
    "POST",
    "/v1/tokens/{token_id}/rotate",
    summary="Rotate a token",
    tag="tokens",
    roles=ADMIN,
    body=TokenRotateIn,
    response=TokenOut,
    status=201,
    errors=(404, 409),
)
async def rotate_token(call: Call) -> Reply:
    """Issue a successor of a live token (same name, role, tenant or cluster); its secret is
    in this response only. The old token keeps working until it is revoked, or until
    `overlapSeconds` from now when given; a revoked or expired token cannot be rotated (409).
    """
    token_id = parse_id("token", call.path("token_id"))
    body = call.body_as(TokenRotateIn)
    async with ctx(call.request).db.transaction() as conn:
        info, clear = await tokens.rotate(
            conn, token_id, ttl_s=body.ttl_seconds, overlap_s=body.overlap_seconds
        )
    TOKENS.clear()
    return Reply(201, _out(info, clear))


@API.op(
    "DELETE",
    "/v1/tokens/{token_id}",
    summary="Revoke a token",
    tag="tokens",
    roles=ADMIN,
    status=204,
    errors=(404,),
)
async def revoke_token(call: Call) -> Reply:
    """Revoke a token at once."""
    token_id = parse_id("token", call.path("token_id"))
    async with ctx(call.request).db.transaction() as conn:
        await tokens.revoke(conn, token_id)
    TOKENS.clear()
    return Reply(204)


@API.op("GET", "/v1/whoami", summary="Who am I", tag="tokens", response=Whoami)
async def whoami(call: Call) -> Reply:
    """The caller's role, tenant and OIDC subject (the console shows what the role may do)."""
    tenant = None
    if call.who.tenant_id is not None:
        async with ctx(call.request).db.connection() as conn:
            (found,) = await tenancy.list_tenants(conn, call.who.tenant_id)
        tenant = found.name
    return Reply(200, Whoami(role=call.who.role, tenant=tenant, subject=call.who.subject))
