"""API tokens: issue and revoke (admin only), and who the caller is."""

from __future__ import annotations

from api.auth import TOKENS
from api.context import ctx
from api.registry import ADMIN, Call, Reply
from api.routes import API
from api.routes.common import parse_id
from api.schemas import TokenIn, TokenList, TokenOut, Whoami
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
    """Issue a token; its secret is in this response only.

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
        token_id, clear = await tokens.issue(
            conn, name=body.name, role=body.role, tenant_id=tenant_id, cluster_id=cluster_id
        )
    return Reply(201, TokenOut(id=token_id, name=body.name, role=body.role, token=clear))


@API.op("GET", "/v1/tokens", summary="List tokens", tag="tokens", roles=ADMIN, response=TokenList)
async def list_tokens(call: Call) -> Reply:
    """Issued tokens without their secrets."""
    async with ctx(call.request).db.connection() as conn:
        rows = await tokens.list_tokens(conn)
    return Reply(
        200,
        TokenList(items=[TokenOut(id=r.id, name=r.name, role=r.role) for r in rows]),
    )


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
    """The calling token's role and tenant (the console shows the actions the role may do)."""
    tenant = None
    if call.who.tenant_id is not None:
        async with ctx(call.request).db.connection() as conn:
            (found,) = await tenancy.list_tenants(conn, call.who.tenant_id)
        tenant = found.name
    return Reply(200, Whoami(role=call.who.role, tenant=tenant))
