"""List+watch one kind of object into a store, resuming by resourceVersion.

`sync` lists (in pages, one consistent snapshot) and replaces the store's content. `run`
then watches from the listed version for ever, with bookmarks so that a quiet stream still
advances the version; a stream that ends or breaks is resumed from the last version seen,
and when the server answers that this version is too old (410 Gone) everything is listed
again (a resync). `problem` says why the view is not current (None while a watch stream is
open): what the agent and the extender report as their reachability.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from cluster_agents.kube.api import JSON, KubeAPIError, call, timestamp
from cluster_agents.kube.metrics import BackendMetrics

log = logging.getLogger(__name__)

PAGE_SIZE = 500
LIST_TIMEOUT_S = 120.0
WATCH_TIMEOUT_S = 300  # the server ends a watch after this; it is resumed at once
CONNECT_TIMEOUT_S = 10.0
BACKOFF_S = 0.25  # first retry after 2x this, doubling up to BACKOFF_MAX_S
BACKOFF_MAX_S = 30.0


@dataclass(frozen=True)
class Store:
    """Where a reflector puts what it lists and watches."""

    replace: Callable[[list[JSON]], None]  # the complete content after a list
    upsert: Callable[[JSON], None]  # added or modified
    remove: Callable[[JSON], None]  # deleted (the last state of the object)


class _Gone(Exception):
    """The watched resourceVersion is too old: list again."""


class Reflector:
    """Keeps a `Store` equal to the cluster's objects of one kind."""

    def __init__(
        self,
        resource: str,
        list_call: Callable[..., Awaitable[Any]],
        store: Store,
        metrics: BackendMetrics,
        clock: Callable[[], float],
    ) -> None:
        self.resource = resource  # "nodes", "pods": names metrics and logs
        self.version = ""  # last resourceVersion seen
        self.resyncs = 0  # lists after the first one
        self._list = list_call
        self._store = store
        self._metrics = metrics
        self._clock = clock
        self._watching: asyncio.Task[None] | None = None
        self._restarting = False
        self.problem: str | None = "not listed yet"

    async def sync(self) -> None:
        """List every object (paged) into the store; raise KubeAPIError when that fails."""
        items: list[JSON] = []
        page: dict[str, Any] = {}
        while True:
            token = (page.get("metadata") or {}).get("continue")
            _, page = await call(
                self._metrics,
                self._list.__name__,
                self._list(
                    limit=PAGE_SIZE,
                    _preload_content=False,
                    _request_timeout=LIST_TIMEOUT_S,
                    **({"_continue": token} if token else {}),
                ),
            )
            items += page.get("items") or []
            if not (page.get("metadata") or {}).get("continue"):
                break
        self._store.replace(items)
        self.version = str((page.get("metadata") or {}).get("resourceVersion") or "")
        self.problem = None

    async def run(self) -> None:
        """Watch for ever (after `sync`); resync after 410 Gone, back off after errors."""
        failures = 0
        stale = False
        while True:
            try:
                if stale:
                    await self.sync()
                    stale = False
                    self.resyncs += 1
                    self._metrics.resyncs.labels(self.resource).inc()
                self._watching = asyncio.create_task(self._watch())
                await self._watching
                failures = 0
            except asyncio.CancelledError:
                if not self._restarting or _cancelling():
                    raise
                self._restarting = False
            except _Gone:
                log.info(
                    "%s: resourceVersion %s expired; listing again", self.resource, self.version
                )
                stale = True
            except Exception as exc:
                if not isinstance(exc, KubeAPIError | ValueError):
                    log.exception("%s: unexpected error", self.resource)
                failures += 1
                self.problem = f"{self.resource} list/watch failing: {exc}"[:512]
                delay = min(BACKOFF_MAX_S, BACKOFF_S * 2**failures)
                log.warning(
                    "%s list/watch failed (%s); retrying in %.1f s", self.resource, exc, delay
                )
                await asyncio.sleep(delay)

    def restart(self, resource_version: str | None = None) -> None:
        """End the current watch and resume from `resource_version` (default: the last seen)."""
        if resource_version is not None:
            self.version = resource_version
        if self._watching is not None and not self._watching.done():
            self._restarting = True
            self._watching.cancel()

    async def _watch(self) -> None:
        """Apply one watch stream's events until the server ends it."""
        try:
            resp = await self._list(
                watch=True,
                resource_version=self.version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_TIMEOUT_S,
                _preload_content=False,
                _request_timeout=(CONNECT_TIMEOUT_S, WATCH_TIMEOUT_S + 30.0),
            )
            async with resp:
                if resp.status == 410:
                    raise _Gone
                if resp.status != 200:
                    text = (await resp.read())[:200].decode(errors="replace")
                    raise KubeAPIError(resp.status, f"watch {self.resource}: {text}")
                self.problem = None
                async for line in resp.content:
                    if line.strip():
                        self._apply(orjson.loads(line))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeAPIError(0, f"watch {self.resource}: {exc}") from exc

    def _apply(self, event: JSON) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone
            raise KubeAPIError(int(obj.get("code") or 0), str(obj.get("message", "")))
        meta = obj.get("metadata") or {}
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            try:
                (self._store.remove if kind == "DELETED" else self._store.upsert)(obj)
            except Exception:  # one odd object must not stop the watch of all others
                log.exception("%s: cannot apply %s of %s", self.resource, kind, meta.get("name"))
        if kind != "BOOKMARK":
            self._observe_lag(meta)
        self.version = str(meta.get("resourceVersion") or self.version)

    def _observe_lag(self, meta: JSON) -> None:
        written = max(
            (timestamp(f.get("time")) for f in meta.get("managedFields") or ()),
            default=timestamp(meta.get("creationTimestamp")),
        )
        if written:
            lag = max(0.0, self._clock() - written)
            self._metrics.watch_lag.labels(self.resource).observe(lag)


def _cancelling() -> bool:
    """Whether the running task itself is being cancelled (not just a watch it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
