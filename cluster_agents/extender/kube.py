"""Kubernetes I/O of the extender through kubernetes_asyncio, on raw JSON.

Responses are read undecoded (`_preload_content=False`) and parsed with `json`: the generated
model classes cost far more than the extender's decisions. `reflect` keeps a cache current
with list+watch and lists again when the watch answers 410 Gone.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from cluster_agents.extender.binder import APIError

log = logging.getLogger(__name__)

JSON = dict[str, Any]
REQUEST_TIMEOUT_S = 10.0
WATCH_TIMEOUT_S = 300  # the server ends a watch after this; we resume from the last version
RETRY_S = 1.0


async def _read(call: Awaitable[Any]) -> JSON:
    """Await a `_preload_content=False` call and decode its JSON; APIError unless 2xx."""
    try:
        resp = await call
        async with resp:
            raw = await resp.read()
            status = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise APIError(0, f"{type(exc).__name__}: {exc}") from exc
    if not 200 <= status < 300:
        try:
            message = json.loads(raw).get("message", "")
        except ValueError:
            message = raw[:200].decode(errors="replace")
        raise APIError(status, message)
    result: JSON = json.loads(raw)
    return result


class KubePods:
    """`binder.PodAPI` over a kubernetes_asyncio `CoreV1Api`."""

    def __init__(self, core_v1: Any) -> None:
        self.core = core_v1

    async def read_pod(self, namespace: str, name: str) -> Mapping[str, Any]:
        """GET the pod."""
        return await _read(
            self.core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S
            )
        )

    async def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> None:
        """POST pods/<name>/binding (as kube-scheduler's binder, plus annotations the apiserver
        merges into the pod); the uid makes it fail on a recreated pod."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid,
                "annotations": dict(annotations),
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await _read(
            self.core.create_namespaced_pod_binding(
                name, namespace, binding, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S
            )
        )


@dataclass(frozen=True)
class Source:
    """One watched resource: how to list/watch it and where its objects go."""

    resource: str  # "nodes" or "pods"
    list_call: Callable[..., Awaitable[Any]]  # e.g. CoreV1Api.list_node
    replace: Callable[[list[JSON]], None]
    upsert: Callable[[JSON], None]
    delete: Callable[[JSON], None]


class _Gone(Exception):
    """The watch's resource version is too old (HTTP 410): list again."""


async def reflect(source: Source, on_relist: Callable[[str], None]) -> None:
    """List, then watch from the list's version, forever; list again after 410 Gone or errors."""
    first = True
    while True:
        if not first:
            on_relist(source.resource)
        first = False
        try:
            listed = await _read(
                source.list_call(_preload_content=False, _request_timeout=REQUEST_TIMEOUT_S * 6)
            )
            source.replace(listed.get("items") or [])
            version = listed["metadata"]["resourceVersion"]
            while True:
                version = await _watch(source, version)
        except _Gone:
            log.info("%s watch expired (410 Gone); listing again", source.resource)
        except (APIError, ValueError, KeyError) as exc:
            log.warning("%s list/watch failed: %s; retrying", source.resource, exc)
            await asyncio.sleep(RETRY_S)


async def _watch(source: Source, version: str) -> str:
    """Apply one watch stream's events; return the last version seen when it ends."""
    try:
        resp = await source.list_call(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_TIMEOUT_S,
            _preload_content=False,
        )
        async with resp:
            if resp.status == 410:
                raise _Gone
            if resp.status != 200:
                raise APIError(resp.status, (await resp.read())[:200].decode(errors="replace"))
            buffer = b""
            async for chunk in resp.content.iter_any():
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        version = _apply(source, json.loads(line), version)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise APIError(0, f"watch stream broke: {exc}") from exc
    return version


def _apply(source: Source, event: JSON, version: str) -> str:
    kind, obj = event.get("type"), event.get("object") or {}
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise _Gone
        raise APIError(int(obj.get("code") or 0), str(obj.get("message", "")))
    if kind == "DELETED":
        source.delete(obj)
    elif kind in ("ADDED", "MODIFIED"):
        source.upsert(obj)
    return str((obj.get("metadata") or {}).get("resourceVersion") or version)
