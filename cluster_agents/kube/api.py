"""Calls to the Kubernetes API on raw JSON, timed into `BackendMetrics`.

Calls are made with `_preload_content=False`: the response is read and decoded with `json`
instead of kubernetes_asyncio's model classes, which cost far more than the backend's work.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Collection
from datetime import datetime
from typing import Any

import aiohttp
import orjson

from cluster_agents.kube.metrics import BackendMetrics

JSON = dict[str, Any]


class KubeAPIError(Exception):
    """A call failed: HTTP `status` (0 when the request never got an answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


async def call(
    metrics: BackendMetrics, name: str, request: Awaitable[Any], accept: Collection[int] = ()
) -> tuple[int, JSON]:
    """Await a `_preload_content=False` call: (status, decoded body) for 2xx or `accept`.

    Raises KubeAPIError for any other status and for transport errors; every call is timed
    under `name` with its status code.
    """
    start = time.perf_counter()
    status = 0
    try:
        resp = await request
        async with resp:
            raw = await resp.read()
            status = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise KubeAPIError(0, f"{name}: {type(exc).__name__}: {exc}") from exc
    finally:
        metrics.api_seconds.labels(name, str(status)).observe(time.perf_counter() - start)
    try:
        body: JSON = orjson.loads(raw) if raw else {}
    except ValueError:
        body = {"message": raw[:200].decode(errors="replace")}
    if 200 <= status < 300 or status in accept:
        return status, body
    raise KubeAPIError(status, f"{name}: {body.get('message', '')}")


def timestamp(text: str | None) -> float:
    """Seconds since the epoch of an RFC 3339 time from the API ("" or None: 0.0)."""
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0
