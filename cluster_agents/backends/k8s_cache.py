"""The backend's in-memory view of one cluster, fed by list+watch (no I/O here).

Every pod of the cluster is kept in compact form (what occupancy needs, plus the status of
Suanpan's own pods); node inventories are recomputed only for nodes whose node object or
pods changed. `changed` is set when something the agent reports changed: a node, a pod's
use of a node, or the status of a Suanpan pod. Suanpan's pods are those labelled managed in
the agent's namespaces (its prefix and the tenant namespaces under it, see
`federation.k8s_names.tenant_namespace`), known by name as the agent knows them (the
renderer's names carry job id, epoch, task and replica, whatever the namespace).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from cluster_agents.agent.backend import PodStatus
from cluster_agents.backends.k8s_nodes import NodeView, node_info, node_view
from cluster_agents.backends.k8s_pods import ManagedPod, managed_pod, pod_status
from cluster_agents.kube.pods import PodInfo, pod_info
from cluster_agents.kube.watch import Store
from federation.catalog import Catalog
from federation.k8s_names import in_tenant_namespace
from federation.wire.agent import NodeInfo

PodKey = tuple[str, str]  # (namespace, name)
GONE_MEMORY = 4096  # uids of deleted pods remembered, so a late write-through cannot revive one


def _key(obj: Mapping[str, Any]) -> PodKey:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


class ClusterCache:
    """Nodes and pods of one cluster, and the inventory and statuses derived from them."""

    def __init__(self, catalog: Catalog, prefix: str) -> None:
        self.catalog = catalog
        self.prefix = prefix
        self._addresses = catalog.device_address_annotations()
        self.changed = asyncio.Event()
        self.node_store = Store(self._replace_nodes, self._upsert_node, self._remove_node)
        self.pod_store = Store(self._replace_pods, self.upsert_pod, self._remove_pod)
        self._nodes: dict[str, NodeView] = {}
        self._pods: dict[PodKey, PodInfo] = {}  # every pod of the cluster
        self._managed: dict[str, ManagedPod] = {}  # Suanpan's pods, by name
        self._on_node: defaultdict[str, set[PodKey]] = defaultdict(set)
        self._infos: dict[str, NodeInfo] = {}  # memoized node_info of clean nodes
        self._gone: dict[str, None] = {}  # uids of deleted pods, oldest first

    # --- derived views -------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        """Every node with its use, by name."""
        for name, view in self._nodes.items():
            if name not in self._infos:
                pods = (self._pods[k] for k in self._on_node.get(name, ()))
                self._infos[name] = node_info(view, pods)
        return [self._infos[name] for name in sorted(self._nodes)]

    def pods(self) -> list[PodStatus]:
        """Suanpan's pods, by name."""
        nodes = self._nodes
        return [
            pod_status(p, nodes[p.node].ready if p.node in nodes else None)
            for _, p in sorted(self._managed.items())
        ]

    def has_pod(self, namespace: str, name: str) -> bool:
        """Whether the pod is known."""
        return (namespace, name) in self._pods

    def managed(self, name: str) -> ManagedPod | None:
        """A Suanpan pod by name."""
        return self._managed.get(name)

    def placement_pods(self, job: str, epoch: int) -> list[ManagedPod]:
        """The Suanpan pods of one placement."""
        return [p for p in self._managed.values() if (p.job, p.epoch) == (job, epoch)]

    # --- nodes ---------------------------------------------------------------------------

    def _replace_nodes(self, nodes: list[dict[str, Any]]) -> None:
        self._nodes = {v.name: v for v in (node_view(self.catalog, n) for n in nodes)}
        self._infos.clear()
        self.changed.set()

    def _upsert_node(self, node: dict[str, Any]) -> None:
        view = node_view(self.catalog, node)
        if self._nodes.get(view.name) != view:
            self._nodes[view.name] = view
            self._infos.pop(view.name, None)
            self.changed.set()

    def _remove_node(self, node: dict[str, Any]) -> None:
        name = (node.get("metadata") or {}).get("name", "")
        if self._nodes.pop(name, None) is not None:
            self._infos.pop(name, None)
            self.changed.set()

    # --- pods ----------------------------------------------------------------------------

    def _replace_pods(self, pods: list[dict[str, Any]]) -> None:
        self._pods, self._managed = {}, {}
        self._on_node.clear()
        self._infos.clear()
        for pod in pods:
            self._put(pod)
        self.changed.set()

    def _put(self, pod: dict[str, Any]) -> tuple[PodInfo | None, bool]:
        """Store a pod; the info it replaces and whether a Suanpan pod's status changed."""
        key, info = _key(pod), pod_info(self.catalog, pod)
        old = self._pods.get(key)
        if old is not None and old.node != info.node:
            self._on_node[old.node].discard(key)
        if info.node:
            self._on_node[info.node].add(key)
        self._pods[key] = info
        if not in_tenant_namespace(self.prefix, key[0]):
            return old, False
        managed = managed_pod(pod, self._addresses)
        before = self._managed.pop(key[1], None)
        if managed is not None:
            self._managed[key[1]] = managed
        return old, managed != before

    def _touch(self, old: PodInfo | None, new: PodInfo | None, status_changed: bool) -> None:
        """Invalidate the nodes a pod's change affects; wake the agent if it should look."""
        if old != new:
            for node in {i.node for i in (old, new) if i is not None} - {""}:
                self._infos.pop(node, None)
                self.changed.set()
        if status_changed:
            self.changed.set()

    def upsert_pod(self, pod: dict[str, Any]) -> None:
        """Add or update a pod (from the watch, or the answer to our own create)."""
        old, status_changed = self._put(pod)
        self._touch(old, self._pods[_key(pod)], status_changed)

    def upsert_created(self, pod: dict[str, Any]) -> None:
        """Record a pod we just created unless the watch already knows it or saw it go."""
        uid = (pod.get("metadata") or {}).get("uid", "")
        if _key(pod) not in self._pods and uid not in self._gone:
            self.upsert_pod(pod)

    def _remove_pod(self, pod: dict[str, Any]) -> None:
        key = _key(pod)
        self._gone[(pod.get("metadata") or {}).get("uid", "")] = None
        if len(self._gone) > GONE_MEMORY:
            del self._gone[next(iter(self._gone))]
        old = self._pods.pop(key, None)
        if old is not None:
            self._on_node[old.node].discard(key)
        ours = in_tenant_namespace(self.prefix, key[0])
        managed = self._managed.pop(key[1], None) if ours else None
        self._touch(old, None, managed is not None)
