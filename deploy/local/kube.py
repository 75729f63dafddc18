"""A small async Kubernetes REST client (aiohttp) for the harness and the e2e tests."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

JSON = dict[str, Any]


class KubeError(RuntimeError):
    """A non-2xx answer from the apiserver."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status


def ssl_context(ca_file: Path | str) -> ssl.SSLContext:
    """TLS context trusting only the run's CA."""
    return ssl.create_default_context(cafile=str(ca_file))


class KubeClient:
    """Bearer-token JSON client for one apiserver (use as an async context manager)."""

    def __init__(self, server: str, token: str, ca_file: Path | str, timeout_s: float = 10) -> None:
        self.server = server.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._ssl = ssl_context(ca_file)
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeClient:
        self._session = aiohttp.ClientSession(headers=self._headers, timeout=self._timeout)
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
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        body: JSON | None = None,
        content_type: str = "application/json",
        base: str | None = None,
    ) -> Any:
        """Send a request to `path` (on `base`, default the apiserver); return decoded JSON."""
        if self._session is None:
            raise RuntimeError("KubeClient used outside `async with`")
        url = (base or self.server) + path
        headers = {"Content-Type": content_type} if body is not None else None
        async with self._session.request(
            method, url, json=body, headers=headers, ssl=self._ssl
        ) as resp:
            text = await resp.text()
            if resp.status >= 300:
                raise KubeError(method, path, resp.status, text)
            if resp.content_type == "application/json":
                return await resp.json(content_type=None)
            return text

    async def get(self, path: str) -> Any:
        """GET path."""
        return await self.request("GET", path)

    async def post(self, path: str, body: JSON) -> Any:
        """POST body to path."""
        return await self.request("POST", path, body)

    async def delete(self, path: str) -> Any:
        """DELETE path."""
        return await self.request("DELETE", path)

    async def merge_patch(self, path: str, body: JSON) -> Any:
        """PATCH path with a JSON merge patch."""
        return await self.request("PATCH", path, body, "application/merge-patch+json")

    async def probe(self, url: str) -> tuple[int, str]:
        """GET an absolute https URL (health endpoints); (status, body), (0, error) if down."""
        if self._session is None:
            raise RuntimeError("KubeClient used outside `async with`")
        try:
            async with self._session.get(
                url, ssl=self._ssl, timeout=aiohttp.ClientTimeout(total=3)
            ) as resp:
                return resp.status, await resp.text()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return 0, f"{type(exc).__name__}: {exc}"


async def wait_for(
    what: str,
    check: Callable[[], Awaitable[bool]],
    timeout_s: float,
    interval_s: float = 0.1,
    explain: Callable[[], str] | None = None,
) -> None:
    """Poll `check` until it returns True; raise TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() >= deadline:
            detail = f": {explain()}" if explain else ""
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}{detail}")
        await asyncio.sleep(interval_s)
