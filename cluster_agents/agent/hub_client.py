"""The agent's side of the hub protocol: typed calls, bounded timeouts, two error types.

Several hub addresses (replicas, or load balancers) may be given: a call that cannot reach one,
or that one answers with a server error, moves the next call to the next address. A lease
renewal, whose lapse stops exclusive work, tries the addresses within its own time budget.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from typing import TypeVar

import aiohttp
from prometheus_client import CollectorRegistry, Histogram
from pydantic import BaseModel

from federation.wire.agent import (
    AgentCredential,
    AssignmentBatch,
    BootstrapRedemption,
    InventoryAck,
    InventoryReport,
    LeaseRenewal,
    LeaseReply,
    Registration,
    RegistrationReply,
    StatusAck,
    StatusReport,
)
from federation.wire.http import RETRY_AFTER, retry_after
from federation.wire.logs import LogFailure, LogRequestBatch
from federation.wire.telemetry import TelemetryAck, TelemetryReport

M = TypeVar("M", bound=BaseModel)


class HubUnavailable(Exception):
    """The hub could not be reached or failed (5xx, 408, 429); the agent retries with back-off,
    or after `retry_after_s` where the hub said when (a request that collided with another in
    its database, a database restarting)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class HubRejected(Exception):
    """The hub refused this request for good (another 4xx); it is not sent again as it is."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_TRANSIENT = frozenset({408, 429})


class HubApi:
    """Calls of the agent protocol with the cluster's agent token, over one or more hub URLs."""

    def __init__(
        self,
        urls: str | Sequence[str],
        token: str,
        registry: CollectorRegistry | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """`tls` verifies an https hub (and may carry the agent's client certificate)."""
        listed = [urls] if isinstance(urls, str) else list(urls)
        self.urls = [u.rstrip("/") for u in listed]
        self._current = 0
        self._token = token
        self._tls = tls
        # one HTTP session per event loop: the lease is renewed from a thread of its own
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        self.round_trips = Histogram(
            "suanpan_agent_hub_round_trip_seconds",
            "Agent to hub call latency by call",
            ["call"],
            registry=registry,
        )

    async def open(self) -> aiohttp.ClientSession:
        """The running event loop's HTTP session, opened on first use."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            session = self._sessions[loop] = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=90, sock_connect=5),
                connector=aiohttp.TCPConnector(ssl=self._tls if self._tls is not None else True),
            )
        return session

    async def close(self) -> None:
        """Close the running event loop's HTTP session."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()

    def use_token(self, token: str) -> None:
        """Send `token` from the next call on (a renewed credential)."""
        self._token = token

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    @property
    def url(self) -> str:
        """The hub address calls go to now."""
        return self.urls[self._current]

    async def _call(
        self,
        method: str,
        path: str,
        reply: type[M],
        body: BaseModel | None = None,
        params: dict[str, str] | None = None,
        timeout_s: float | None = None,
        at: int | None = None,
    ) -> M:
        """One call to the current address (or to address number `at`)."""
        session = await self.open()
        start = time.perf_counter()
        url = self.url if at is None else self.urls[at]
        limit = session.timeout
        if timeout_s is not None:
            limit = aiohttp.ClientTimeout(total=timeout_s, sock_connect=5)
        try:
            async with session.request(
                method,
                url + path,
                data=body.model_dump_json(by_alias=True) if body is not None else None,
                headers={"Content-Type": "application/json", **self._auth()},
                params=params,
                timeout=limit,
            ) as resp:
                text = await resp.text()
                if 400 <= resp.status < 500 and resp.status not in _TRANSIENT:
                    raise HubRejected(resp.status, f"{method} {path}: {resp.status} {text[:300]}")
                if resp.status not in (200, 201):
                    raise HubUnavailable(
                        f"{method} {url}{path}: {resp.status} {text[:300]}",
                        retry_after(resp.headers.get(RETRY_AFTER)),
                    )
                return reply.model_validate_json(text)
        except (aiohttp.ClientError, TimeoutError) as exc:
            if self.url == url:
                self._current = (self._current + 1) % len(self.urls)
            raise HubUnavailable(f"{method} {url}{path}: {exc!r}") from exc
        except HubUnavailable:
            if self.url == url:  # not moved on by a concurrent call already
                self._current = (self._current + 1) % len(self.urls)
            raise
        finally:
            self.round_trips.labels(path.rsplit("/", 1)[-1]).observe(time.perf_counter() - start)

    async def bootstrap(self, redemption: BootstrapRedemption) -> AgentCredential:
        """Exchange the cluster's single-use bootstrap token for its credential."""
        return await self._call("POST", "/v1/agent/bootstrap", AgentCredential, redemption)

    async def renew_credential(self) -> AgentCredential:
        """A new credential for the cluster (the current one expires after a grace)."""
        return await self._call("POST", "/v1/agent/credential", AgentCredential)

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

    async def lease(
        self, renewal: LeaseRenewal, timeout_s: float, hedge_after_s: float
    ) -> LeaseReply:
        """Renew the cluster's lease within `timeout_s`. With several hub addresses the renewal
        never waits out its budget on one: an address that fails it passes it to the next at
        once, and one silent for `hedge_after_s` (a frozen replica, whose kernel still accepts
        connections) is raced by the same renewal to the next; the first acceptance wins and
        becomes the current address. Renewals are idempotent, so a race costs nothing."""
        order = [(self._current + i) % len(self.urls) for i in range(len(self.urls))]
        deadline = time.monotonic() + timeout_s
        running: dict[asyncio.Task[LeaseReply], int] = {}
        failure: BaseException = HubUnavailable("lease: no hub address answered in time")
        try:
            while order or running:
                left = deadline - time.monotonic()
                if order and left > 0:
                    at = order.pop(0)
                    call = self._call(
                        "POST", "/v1/agent/lease", LeaseReply, renewal, timeout_s=left, at=at
                    )
                    running[asyncio.create_task(call)] = at
                elif not running:
                    break
                done, _ = await asyncio.wait(
                    running,
                    timeout=hedge_after_s if order else None,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                for task in done:
                    at = running.pop(task)
                    error = task.exception()
                    if error is None:
                        self._current = at
                        return task.result()
                    if isinstance(error, HubRejected):
                        raise error
                    failure = error
            raise failure
        finally:
            for task in running:
                task.cancel()

    async def status(self, report: StatusReport) -> StatusAck:
        """Report status updates."""
        return await self._call("POST", "/v1/agent/status", StatusAck, report)

    async def telemetry(self, report: TelemetryReport) -> TelemetryAck:
        """Report device telemetry."""
        return await self._call("POST", "/v1/agent/telemetry", TelemetryAck, report)

    async def log_requests(self, wait: float) -> LogRequestBatch:
        """Log requests not handed out before, waiting up to `wait` s for one."""
        return await self._call(
            "GET", "/v1/agent/logs", LogRequestBatch, params={"wait": str(wait)}
        )

    async def upload_log(self, request_id: str, chunks: AsyncIterator[bytes]) -> bool:
        """Stream a log up as one chunked body; False when the hub stopped it (client gone)."""
        session = await self.open()
        async with session.post(
            f"{self.url}/v1/agent/logs/{request_id}",
            data=chunks,
            headers=self._auth(),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        ) as resp:
            return resp.status == 204

    async def log_failed(self, request_id: str, message: str) -> None:
        """Say why a request's log cannot be read."""
        session = await self.open()
        async with session.post(
            f"{self.url}/v1/agent/logs/{request_id}/failure",
            data=LogFailure(message=message[:1024]).model_dump_json(),
            headers={"Content-Type": "application/json", **self._auth()},
        ):
            pass
