"""Kubernetes I/O of the extender: the Binding call, and list+watch into the cache.

Both go through the raw-JSON helpers the agent's backend uses too (`cluster_agents.kube.api.call`,
`cluster_agents.kube.watch.Reflector`: paged lists, watches resumed by resourceVersion, a full
list after 410 Gone, backoff on errors), so the two processes watch the cluster the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from cluster_agents.extender.binder import APIError
from cluster_agents.extender.cache import Cache
from cluster_agents.kube.api import KubeAPIError, call
from cluster_agents.kube.metrics import BackendMetrics
from cluster_agents.kube.watch import Reflector, Store

REQUEST_TIMEOUT_S = 10.0


class KubePods:
    """`binder.PodAPI` over a kubernetes_asyncio `CoreV1Api`."""

    def __init__(self, core_v1: Any, metrics: BackendMetrics) -> None:
        self.core = core_v1
        self.metrics = metrics

    async def read_pod(self, namespace: str, name: str) -> Mapping[str, Any]:
        """GET the pod."""
        request = self.core.read_namespaced_pod(
            name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S
        )
        return await self._call("read_namespaced_pod", request)

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
        request = self.core.create_namespaced_pod_binding(
            name, namespace, binding, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S
        )
        await self._call("create_namespaced_pod_binding", request)

    async def _call(self, name: str, request: Any) -> dict[str, Any]:
        try:
            return (await call(self.metrics, name, request))[1]
        except KubeAPIError as exc:
            raise APIError(exc.status, str(exc)) from exc


def reflectors(core_v1: Any, cache: Cache, metrics: BackendMetrics) -> list[Reflector]:
    """List+watch of nodes and pods into `cache` (call `sync`, then `run`)."""
    nodes = Store(
        cache.replace_nodes, cache.set_node, lambda o: cache.remove_node(o["metadata"]["name"])
    )
    pods = Store(
        cache.replace_pods, cache.set_pod, lambda o: cache.remove_pod(o["metadata"]["uid"])
    )
    return [
        Reflector("nodes", core_v1.list_node, nodes, metrics, time.time),
        Reflector("pods", core_v1.list_pod_for_all_namespaces, pods, metrics, time.time),
    ]


async def keep_synced(watches: list[Reflector]) -> None:
    """List everything until that succeeds, then watch for ever."""
    for watch in watches:
        while True:
            try:
                await watch.sync()
                break
            except KubeAPIError:
                await asyncio.sleep(1.0)
    await asyncio.gather(*(watch.run() for watch in watches))
