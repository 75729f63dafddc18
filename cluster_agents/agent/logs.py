"""The agent's half of the log relay: take log requests on its outbound long-poll, read each
pod's log from the cluster and upload it to the hub as it comes (see api/routes/logs.py).

A stream ends with the container (when following), at the byte limit, or when the hub answers
that its client left. Requests are not retried: a client whose stream broke asks again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator

import aiohttp

from cluster_agents.agent.backend import ClusterBackend, LogError
from cluster_agents.agent.hub_client import HubApi, HubRejected, HubUnavailable
from cluster_agents.agent.render import pod_name
from federation.aio import cancel_all, sleep_unless_stopped
from federation.wire.logs import LogRequest

log = logging.getLogger(__name__)


class LogStreamer:
    """Serves the hub's log requests for one cluster."""

    def __init__(self, backend: ClusterBackend, hub: HubApi, poll_wait_s: float = 10.0) -> None:
        self.backend = backend
        self.hub = hub
        self.poll_wait_s = poll_wait_s
        self._streams: set[asyncio.Task[None]] = set()

    async def run(self, stop: asyncio.Event) -> None:
        """Poll for requests until `stop`, each streamed in a task of its own."""
        backoff = 0.5
        try:
            while not stop.is_set():
                try:
                    batch = await self.hub.log_requests(self.poll_wait_s)
                    backoff = 0.5
                except (HubUnavailable, HubRejected) as exc:
                    log.info("log requests unavailable: %s", exc)
                    await sleep_unless_stopped(stop, backoff * random.uniform(0.5, 1.5))
                    backoff = min(backoff * 2, 30.0)
                    continue
                for request in batch.items:
                    task = asyncio.create_task(self.stream(request))
                    self._streams.add(task)
                    task.add_done_callback(self._streams.discard)
        finally:
            await cancel_all(self._streams)

    async def stream(self, request: LogRequest) -> None:
        """Upload one request's log (or say why there is none)."""
        name = pod_name(str(request.job), request.epoch, request.task, request.replica)
        chunks = self.backend.pod_logs(
            name,
            request.container,
            follow=request.follow,
            tail=request.tail,
            limit_bytes=request.limit_bytes,
        )
        try:
            first = await anext(chunks, b"")
        except LogError as exc:
            await self._fail(request, str(exc))
            return

        async def body() -> AsyncIterator[bytes]:
            yield first
            async for chunk in chunks:
                yield chunk

        try:
            await self.hub.upload_log(str(request.id), body())
        except (aiohttp.ClientError, TimeoutError, LogError) as exc:
            log.info("log stream %s ended early: %s", request.id, exc)
        finally:
            await chunks.aclose()

    async def _fail(self, request: LogRequest, message: str) -> None:
        try:
            await self.hub.log_failed(str(request.id), message)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.info("cannot report log failure %s: %s", request.id, exc)
