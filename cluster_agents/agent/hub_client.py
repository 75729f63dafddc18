"""The agent's side of the hub protocol: typed calls, a bounded timeout, one error type."""

from __future__ import annotations

import time
from typing import TypeVar

import aiohttp
from prometheus_client import CollectorRegistry, Histogram
from pydantic import BaseModel

from federation.wire.agent import (
    AssignmentBatch,
    InventoryAck,
    InventoryReport,
    Registration,
    RegistrationReply,
    StatusAck,
    StatusReport,
)

M = TypeVar("M", bound=BaseModel)


class HubUnavailable(Exception):
    """The hub could not be reached or refused the call; the agent reconnects with backoff."""


class HubApi:
    """Calls of the agent protocol with the cluster's agent token."""

    def __init__(self, url: str, token: str, registry: CollectorRegistry | None = None) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self._session: aiohttp.ClientSession | None = None
        self.round_trips = Histogram(
            "suanpan_agent_hub_round_trip_seconds",
            "Agent to hub call latency by call",
            ["call"],
            registry=registry,
        )

    async def open(self) -> None:
        """Open the HTTP session (idempotent)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {self._token}"},
                timeout=aiohttp.ClientTimeout(total=90, sock_connect=5),
            )

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(
        self,
        method: str,
        path: str,
        reply: type[M],
        body: BaseModel | None = None,
        params: dict[str, str] | None = None,
    ) -> M:
        await self.open()
        assert self._session is not None
        start = time.perf_counter()
        try:
            async with self._session.request(
                method,
                self.url + path,
                data=body.model_dump_json(by_alias=True) if body is not None else None,
                headers={"Content-Type": "application/json"},
                params=params,
            ) as resp:
                text = await resp.text()
                if resp.status != 200:
                    raise HubUnavailable(f"{method} {path}: {resp.status} {text[:300]}")
                return reply.model_validate_json(text)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise HubUnavailable(f"{method} {path}: {exc!r}") from exc
        finally:
            self.round_trips.labels(path.rsplit("/", 1)[-1]).observe(time.perf_counter() - start)

    async def register(self, reg: Registration) -> RegistrationReply:
        """Register (on every connect)."""
        return await self._call("POST", "/v1/agent/register", RegistrationReply, reg)

    async def inventory(self, report: InventoryReport) -> InventoryAck:
        """Send a full inventory or a delta."""
        return await self._call("POST", "/v1/agent/inventory", InventoryAck, report)

    async def assignments(self, after: int, wait: float) -> AssignmentBatch:
        """Assignments changed after revision `after`, waiting up to `wait` s for one."""
        return await self._call(
            "GET",
            "/v1/agent/assignments",
            AssignmentBatch,
            params={"after": str(after), "wait": str(wait)},
        )

    async def status(self, report: StatusReport) -> StatusAck:
        """Report status updates."""
        return await self._call("POST", "/v1/agent/status", StatusAck, report)
