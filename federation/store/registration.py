"""Cluster registration with double opt-in: an administrator issues a single-use bootstrap token
for a cluster name, the cluster's agent exchanges it once for its own credential (renewed
before expiry), and the cluster gets work only once accepted (by an administrator or the
auto-accept policy). Revoking a cluster invalidates every credential it has and loses it.

Credentials and bootstrap tokens are random, shown once in clear and stored as digests.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.errors import Conflict, NotFound, Unauthorized
from federation.hubconfig import RegistrationConfig
from federation.store import tokens
from federation.store.clusters import ensure_cluster
from federation.store.events import add_event
from federation.store.lifecycle import cluster_revoked
from federation.store.records import Principal
from federation.store.tables import bootstrap_tokens, cluster_credentials, clusters

BOOTSTRAP_PREFIX = "spb_"
CREDENTIAL_PREFIX = "spc_"


@dataclass(frozen=True)
class Secret:
    """A bootstrap token or credential as issued: its id, clear text (shown once), expiry."""

    id: uuid.UUID
    token: str
    expires_at: datetime


def _seconds(value: float) -> sa.ColumnElement[datetime]:
    return sa.func.now() + sa.func.make_interval(0, 0, 0, 0, 0, 0, value)


async def _issue(
    conn: AsyncConnection, table: sa.Table, prefix: str, cluster_id: uuid.UUID, ttl_s: float
) -> Secret:
    """Store a fresh secret of `cluster_id` in `table` (bootstrap tokens or credentials)."""
    clear = tokens.new_token(prefix)
    row = (
        await conn.execute(
            sa.insert(table)
            .values(
                cluster_id=cluster_id, token_hash=tokens.digest(clear), expires_at=_seconds(ttl_s)
            )
            .returning(table.c.id, table.c.expires_at)
        )
    ).one()
    return Secret(row.id, clear, row.expires_at)


async def issue_bootstrap(conn: AsyncConnection, cluster: str, ttl_s: float) -> Secret:
    """A single-use bootstrap token for `cluster` (registered as Pending if new), valid `ttl_s`."""
    cluster_id = await ensure_cluster(conn, cluster)
    issued = await _issue(conn, bootstrap_tokens, BOOTSTRAP_PREFIX, cluster_id, ttl_s)
    await add_event(
        conn,
        kind="Cluster",
        reason="BootstrapTokenIssued",
        cluster_id=cluster_id,
        data={"token": str(issued.id), "expiresAt": issued.expires_at.isoformat()},
    )
    return issued


async def redeem_bootstrap(
    conn: AsyncConnection, cluster: str, token: str, policy: RegistrationConfig
) -> Secret:
    """Spend `cluster`'s bootstrap token `token` and return the cluster's first credential;
    an unknown, used or expired token (or one of another cluster) is Unauthorized and spends
    nothing. The cluster is accepted here when the auto-accept policy names it."""
    cluster_id = await conn.scalar(
        sa.update(bootstrap_tokens)
        .where(
            bootstrap_tokens.c.token_hash == tokens.digest(token),
            bootstrap_tokens.c.used_at.is_(None),
            bootstrap_tokens.c.expires_at > sa.func.now(),
            bootstrap_tokens.c.cluster_id == clusters.c.id,
            clusters.c.name == cluster,
        )
        .values(used_at=sa.func.now())
        .returning(bootstrap_tokens.c.cluster_id)
    )
    if cluster_id is None:
        raise Unauthorized(f"no unused, unexpired bootstrap token of cluster {cluster!r} matches")
    credential = await _issue(
        conn, cluster_credentials, CREDENTIAL_PREFIX, cluster_id, policy.credential_ttl_s
    )
    await add_event(conn, kind="Cluster", reason="Bootstrapped", cluster_id=cluster_id)
    if policy.accepts(cluster):
        await accept(conn, cluster, by="auto-accept policy")
    return credential


async def authenticate(conn: AsyncConnection, token: str) -> Principal | None:
    """The agent principal of a valid (unrevoked, unexpired) cluster credential, else None."""
    row = (
        await conn.execute(
            sa.select(cluster_credentials.c.id, cluster_credentials.c.cluster_id).where(
                cluster_credentials.c.token_hash == tokens.digest(token),
                cluster_credentials.c.revoked_at.is_(None),
                cluster_credentials.c.expires_at > sa.func.now(),
            )
        )
    ).one_or_none()
    if row is None:
        return None
    return Principal(token_id=row.id, role="agent", cluster_id=row.cluster_id)


async def renew(conn: AsyncConnection, who: Principal, policy: RegistrationConfig) -> Secret:
    """A fresh credential for the caller's cluster; the calling one expires after the grace
    (so that an agent that has not stored the new one yet is not cut off)."""
    assert who.cluster_id is not None
    old = await conn.scalar(
        sa.update(cluster_credentials)
        .where(
            cluster_credentials.c.id == who.token_id,
            cluster_credentials.c.cluster_id == who.cluster_id,
        )
        .values(
            expires_at=sa.func.least(
                cluster_credentials.c.expires_at, _seconds(policy.renewal_grace_s)
            )
        )
        .returning(cluster_credentials.c.id)
    )
    if old is None:
        raise Conflict("a static agent token is not renewed; register with a bootstrap token")
    return await _issue(
        conn, cluster_credentials, CREDENTIAL_PREFIX, who.cluster_id, policy.credential_ttl_s
    )


async def accept(
    conn: AsyncConnection, cluster: str, *, by: str = "administrator", create: bool = False
) -> uuid.UUID:
    """Accept `cluster` for work (accepting it again changes nothing; `create`: registering
    it as Pending first if new); return its id."""
    if create:
        await ensure_cluster(conn, cluster)
    changed: uuid.UUID | None = await conn.scalar(
        sa.update(clusters)
        .where(clusters.c.name == cluster, ~clusters.c.accepted)
        .values(accepted=True, version=clusters.c.version + 1)
        .returning(clusters.c.id)
    )
    if changed is not None:
        await add_event(
            conn, kind="Cluster", reason="Accepted", cluster_id=changed, message=f"by {by}"
        )
        return changed
    found: uuid.UUID | None = await conn.scalar(
        sa.select(clusters.c.id).where(clusters.c.name == cluster)
    )
    if found is None:
        raise NotFound("cluster", cluster)
    return found


async def revoke(conn: AsyncConnection, cluster: str) -> None:
    """Refuse `cluster`'s agent from now on: its credentials, agent tokens and unused bootstrap
    tokens stop working, it is no longer accepted, and it is lost (its jobs fail over as from
    an Offline cluster). A new bootstrap token and acceptance bring it back."""
    cluster_id = await conn.scalar(
        sa.update(clusters)
        .where(clusters.c.name == cluster)
        .values(accepted=False, version=clusters.c.version + 1)
        .returning(clusters.c.id)
    )
    if cluster_id is None:
        raise NotFound("cluster", cluster)
    now = sa.func.now()
    await conn.execute(
        sa.update(cluster_credentials)
        .where(
            cluster_credentials.c.cluster_id == cluster_id,
            cluster_credentials.c.revoked_at.is_(None),
        )
        .values(revoked_at=now)
    )
    await conn.execute(
        sa.update(bootstrap_tokens)
        .where(bootstrap_tokens.c.cluster_id == cluster_id, bootstrap_tokens.c.used_at.is_(None))
        .values(used_at=now)
    )
    await tokens.revoke_cluster_tokens(conn, cluster_id)
    was = await cluster_revoked(conn, cluster_id)
    await add_event(
        conn, kind="Cluster", reason="Revoked", cluster_id=cluster_id, data={"from": was}
    )
