"""A small async client of the hub API, used by the CLI and the demo.

A call the hub refuses for now (503: its database does not answer or rolled the request back;
429: over a rate limit) is sent again after the `Retry-After` it gave (else after a growing,
jittered back-off), up to `ATTEMPTS` times and never after waiting more than `MAX_WAIT_S` at
once, when sending it twice is safe: a read, a PUT or DELETE, or a request with an
`Idempotency-Key`, which `submit` always sends (a fresh one unless the caller gives its own).
"""

from __future__ import annotations

import asyncio
import random
import ssl
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp

from federation.wire.http import IDEMPOTENCY_HEADER, RETRY_AFTER, retry_after

ATTEMPTS = 5  # sends of one call the hub refuses for now
MAX_WAIT_S = 30.0  # the longest wait before sending it again (a longer Retry-After: give up)
BACKOFF_S = 0.5  # the first wait where the hub did not say how long
REFUSED_FOR_NOW = frozenset({429, 503})
SAFE_TO_REPEAT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


class HubError(Exception):
    """The hub answered with a problem document."""

    def __init__(
        self, status: int, problem: dict[str, Any], retry_after_s: float | None = None
    ) -> None:
        self.status = status
        self.problem = problem
        self.retry_after_s = retry_after_s  # the hub's Retry-After, when it gave one
        lines = [f"{status} {problem.get('title', '')}: {problem.get('detail', '')}"]
        lines += [
            f"  {e['path']}: {e['message']}"
            + (f" (expected {e['expected']})" if e.get("expected") else "")
            for e in problem.get("errors", [])
        ]
        super().__init__("\n".join(lines))


@dataclass(frozen=True, slots=True)
class _Call:
    """One request, as it is sent (again)."""

    method: str
    path: str
    json: Any
    data: str | None
    params: dict[str, str] | None
    headers: dict[str, str] | None


class HubClient:
    """Calls the hub with a bearer token; raises HubError on any error status.

    `url` may list several hub replicas separated by commas: a call that cannot connect to
    one (nothing was sent) is sent to the next, which then serves the following calls.
    `tls` verifies an https hub (default: against the system's CAs).
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = 30,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        self.url = self.urls[0]
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session = aiohttp.ClientSession(
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
            connector=aiohttp.TCPConnector(ssl=tls if tls is not None else True),
        )

    async def __aenter__(self) -> HubClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP session."""
        await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: str | None = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Send a request and return the decoded JSON body (None for 204); sent again while
        the hub refuses it for now, where that is safe (see the module)."""
        call = _Call(method, path, json, data, params, headers)
        repeatable = method in SAFE_TO_REPEAT or IDEMPOTENCY_HEADER in (headers or {})
        attempt = 1
        while True:
            try:
                return await self._any_replica(call)
            except HubError as exc:
                wait = _wait_s(exc, attempt) if repeatable and attempt < ATTEMPTS else None
                if wait is None:
                    raise
            await asyncio.sleep(wait)
            attempt += 1

    async def _any_replica(self, call: _Call) -> Any:
        """The call sent to the replica that served the last one, else the next that answers."""
        first = self.urls.index(self.url)
        order = self.urls[first:] + self.urls[:first]
        for url in order[:-1]:
            try:
                return await self._send(url, call)
            except aiohttp.ClientConnectorError:
                continue
        return await self._send(order[-1], call)

    async def _send(self, url: str, call: _Call) -> Any:
        async with self._session.request(
            call.method,
            url + call.path,
            json=call.json,
            data=call.data,
            params=call.params,
            headers=call.headers,
        ) as resp:
            self.url = url
            if resp.status == 204:
                return None
            body = await resp.json(content_type=None)
            if resp.status >= 400:
                raise HubError(
                    resp.status,
                    body if isinstance(body, dict) else {"detail": body},
                    retry_after(resp.headers.get(RETRY_AFTER)),
                )
            return body

    async def stream(self, path: str, params: dict[str, str]) -> AsyncIterator[bytes]:
        """The body of a streamed GET (a log) chunk by chunk, without the call's time limit."""
        async with self._session.get(
            self.url + path, params=params, timeout=aiohttp.ClientTimeout(total=None)
        ) as resp:
            if resp.status >= 400:
                body = await resp.json(content_type=None)
                raise HubError(resp.status, body if isinstance(body, dict) else {"detail": body})
            async for chunk in resp.content.iter_any():
                yield chunk

    async def submit(
        self, manifest: str | dict[str, Any], idempotency_key: str | None = None
    ) -> Any:
        """Submit a job manifest (YAML text or a mapping) under `idempotency_key` (a fresh
        one if None), so that sending it again never makes a second job."""
        headers = {IDEMPOTENCY_HEADER: idempotency_key or str(uuid.uuid4())}
        if isinstance(manifest, str):
            headers["Content-Type"] = "application/yaml"
            return await self.request("POST", "/v1/jobs", data=manifest, headers=headers)
        return await self.request("POST", "/v1/jobs", json=manifest, headers=headers)


def _wait_s(error: HubError, attempt: int) -> float | None:
    """How long to wait before sending a refused call again (None: not refused for now, or
    the hub asked for longer than `MAX_WAIT_S`)."""
    if error.status not in REFUSED_FOR_NOW:
        return None
    if error.retry_after_s is not None:
        return error.retry_after_s if error.retry_after_s <= MAX_WAIT_S else None
    backoff: float = min(BACKOFF_S * 2.0 ** (attempt - 1), MAX_WAIT_S)
    return backoff * random.uniform(0.5, 1.0)
