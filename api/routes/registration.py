"""Cluster registration with double opt-in: bootstrap tokens, the agent's exchange and renewal
of its credential, acceptance and revocation (docs/operator-guide.md, "Registering a cluster")."""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError

from api.auth import TOKENS
from api.context import ctx
from api.problems import invalid
from api.registry import ADMIN, Call, Reply
from api.routes import API
from api.routes.agent import AGENT
from api.routes.clusters import cluster_out
from api.schemas import BootstrapTokenIn, BootstrapTokenOut, ClusterOut
from federation.k8s_names import DnsLabel
from federation.store import clusters as cluster_store
from federation.store import registration
from federation.store.registration import Secret
from federation.wire.agent import AgentCredential, BootstrapRedemption

_CLUSTER_NAME: TypeAdapter[str] = TypeAdapter(DnsLabel)


def _credential(secret: Secret) -> AgentCredential:
    return AgentCredential(token=secret.token, expires_at=secret.expires_at)


@API.op(
    "POST",
    "/v1/clusters/{cluster}/bootstrap-tokens",
    summary="Issue a bootstrap token",
    tag="clusters",
    roles=ADMIN,
    body=BootstrapTokenIn,
    response=BootstrapTokenOut,
    status=201,
    errors=(422,),
)
async def issue_bootstrap_token(call: Call) -> Reply:
    """A single-use token the cluster's agent exchanges for its own credential, valid
    `ttlSeconds`; the cluster is registered as Pending (not accepted) if new. The token is in
    this response only."""
    name = call.path("cluster")
    try:
        _CLUSTER_NAME.validate_python(name)
    except ValidationError as exc:
        raise invalid(exc, "cluster name", ("cluster",)) from exc
    ttl = call.body_as(BootstrapTokenIn).ttl_seconds
    async with ctx(call.request).db.transaction() as conn:
        secret = await registration.issue_bootstrap(conn, name, ttl)
    return Reply(
        201,
        BootstrapTokenOut(
            id=secret.id, cluster=name, token=secret.token, expires_at=secret.expires_at
        ),
    )


@API.op(
    "POST",
    "/v1/agent/bootstrap",
    summary="Exchange a bootstrap token",
    tag="agent",
    roles=(),
    body=BootstrapRedemption,
    response=AgentCredential,
    status=201,
    errors=(401,),
)
async def agent_bootstrap(call: Call) -> Reply:
    """Spend the cluster's bootstrap token (sent in the body, no bearer token) for the
    cluster's own credential; a used, expired or unknown one is 401."""
    body = call.body_as(BootstrapRedemption)
    hub = ctx(call.request)
    async with hub.db.transaction() as conn:
        secret = await registration.redeem_bootstrap(
            conn, body.cluster, body.token, hub.config.registration
        )
    return Reply(201, _credential(secret))


@API.op(
    "POST",
    "/v1/agent/credential",
    summary="Renew the agent credential",
    tag="agent",
    roles=AGENT,
    response=AgentCredential,
    status=201,
    errors=(409,),
)
async def agent_renew_credential(call: Call) -> Reply:
    """A new credential for the caller's cluster; the calling one keeps working for the
    renewal grace (`registration.renewalGraceSeconds`), then expires."""
    hub = ctx(call.request)
    async with hub.db.transaction() as conn:
        secret = await registration.renew(conn, call.who, hub.config.registration)
    return Reply(201, _credential(secret))


@API.op(
    "POST",
    "/v1/clusters/{cluster}/accept",
    summary="Accept a cluster",
    tag="clusters",
    roles=ADMIN,
    response=ClusterOut,
    errors=(404,),
)
async def accept_cluster(call: Call) -> Reply:
    """Let the scheduler place work on the cluster (its agent registered and reports already)."""
    name = call.path("cluster")
    async with ctx(call.request).db.transaction() as conn:
        await registration.accept(conn, name)
        (found,) = await cluster_store.summaries(conn, name)
    return Reply(200, cluster_out(found))


@API.op(
    "POST",
    "/v1/clusters/{cluster}/revoke",
    summary="Revoke a cluster",
    tag="clusters",
    roles=ADMIN,
    response=ClusterOut,
    errors=(404,),
)
async def revoke_cluster(call: Call) -> Reply:
    """Refuse the cluster's agent from its next request (every replica within 2 s), stop
    accepting the cluster and fail its jobs over as from a lost cluster."""
    name = call.path("cluster")
    async with ctx(call.request).db.transaction() as conn:
        await registration.revoke(conn, name)
        (found,) = await cluster_store.summaries(conn, name)
    TOKENS.clear()
    return Reply(200, cluster_out(found))
