"""A small async client of the hub API, used by the CLI and the demo."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import aiohttp


class HubError(Exception):
    """The hub answered with a problem document."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        lines = [f"{status} {problem.get('title', '')}: {problem.get('detail', '')}"]
        lines += [
            f"  {e['path']}: {e['message']}"
            + (f" (expected {e['expected']})" if e.get("expected") else "")
            for e in problem.get("errors", [])
        ]
        super().__init__("\n".join(lines))


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
        """Send a request and return the decoded JSON body (None for 204)."""
        first = self.urls.index(self.url)
        order = self.urls[first:] + self.urls[:first]
        for url in order[:-1]:
            try:
                return await self._send(url, method, path, json, data, params, headers)
            except aiohttp.ClientConnectorError:
                continue
        return await self._send(order[-1], method, path, json, data, params, headers)

    async def _send(
        self,
        url: str,
        method: str,
        path: str,
        json: Any,
        data: str | None,
        params: dict[str, str] | None,
        headers: dict[str, str] | None,
    ) -> Any:
        async with self._session.request(
            method, url + path, json=json, data=data, params=params, headers=headers
        ) as resp:
            self.url = url
            if resp.status == 204:
                return None
            body = await resp.json(content_type=None)
            if resp.status >= 400:
                raise HubError(resp.status, body if isinstance(body, dict) else {"detail": body})
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
        """Submit a job manifest (YAML text or a mapping)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        if isinstance(manifest, str):
            headers["Content-Type"] = "application/yaml"
            return await self.request("POST", "/v1/jobs", data=manifest, headers=headers)
        return await self.request("POST", "/v1/jobs", json=manifest, headers=headers)
