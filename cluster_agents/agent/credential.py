"""The agent's own cluster credential: obtained once with the bootstrap token, kept in a file,
renewed before it expires (docs/operator-guide.md, "Registering a cluster")."""

from __future__ import annotations

import asyncio
import logging
import random
from datetime import UTC, datetime
from pathlib import Path

from cluster_agents.agent.hub_client import HubApi, HubRejected, HubUnavailable
from federation.aio import sleep_unless_stopped
from federation.wire.agent import AgentCredential, BootstrapRedemption

log = logging.getLogger(__name__)
RENEW_AT = 2 / 3  # renew once this share of the credential's lifetime has passed
RETRY_S = 30.0


def load(path: Path) -> AgentCredential | None:
    """The stored credential, None when there is none or it has expired."""
    try:
        stored = AgentCredential.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None
    return stored if stored.expires_at > datetime.now(UTC) else None


def store(path: Path, credential: AgentCredential) -> None:
    """Write the credential readable by the agent's user only, replacing the file atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(credential.model_dump_json())
    tmp.chmod(0o600)
    tmp.replace(path)


async def obtain(hub: HubApi, path: Path, cluster: str, bootstrap_token: str) -> AgentCredential:
    """The stored credential, or a new one for the bootstrap token (stored at once). An
    unreachable hub is retried with jittered back-off (the agent never exits on it); a refused
    bootstrap token (used, expired, another cluster's) is raised: it needs a new one."""
    credential = load(path)
    backoff = 0.5
    while credential is None:
        try:
            credential = await hub.bootstrap(
                BootstrapRedemption(cluster=cluster, token=bootstrap_token)
            )
        except HubUnavailable as exc:
            log.warning("hub unavailable for bootstrap (%s); retrying in %.1f s", exc, backoff)
            await asyncio.sleep(backoff * random.uniform(0.5, 1.5))
            backoff = min(backoff * 2, RETRY_S)
            continue
        store(path, credential)
    hub.use_token(credential.token)
    return credential


async def renew_loop(
    hub: HubApi, path: Path, credential: AgentCredential, stop: asyncio.Event
) -> None:
    """Renew the credential after `RENEW_AT` of its remaining lifetime, store the new one and
    send it from then on; failures are retried every `RETRY_S` until it has expired."""
    while not stop.is_set():
        left = (credential.expires_at - datetime.now(UTC)).total_seconds()
        await sleep_unless_stopped(stop, max(0.0, left * RENEW_AT))
        if stop.is_set():
            return
        try:
            credential = await hub.renew_credential()
        except (HubUnavailable, HubRejected) as exc:
            log.warning("credential not renewed (%s); retrying in %.0f s", exc, RETRY_S)
            await sleep_unless_stopped(stop, RETRY_S)
            continue
        store(path, credential)
        hub.use_token(credential.token)
