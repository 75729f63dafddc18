"""The backend's in-memory view of one cluster, fed by list+watch (no I/O here).

Every pod of the cluster is kept in compact form (what occupancy needs, plus the status of
Suanpan's own pods); node inventories are recomputed only for nodes whose node object or
pods changed. `changed` is set when something the agent reports changed: a node, a pod's
use of a node, or the status of a Suanpan pod in the agent's namespace.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster_agents.agent.backend import PodStatus
from cluster_agents.backends.k8s_nodes import NodeView, node_info, node_view
from cluster_agents.backends.k8s_pods import ManagedPod, managed_pod, pod_status
from cluster_agents.backends.k8s_watch import Store
from cluster_agents.extender.demand import PodInfo, pod_info
from federation.catalog import Catalog
from federation.wire.agent import NodeInfo

PodKey = tuple[str, str]  # (namespace, name)
GONE_MEMORY = 4096  # uids of deleted pods remembered, so a late write-through cannot revive one


@dataclass(frozen=True, slots=True)
class _Pod:
    info: PodInfo
    managed: ManagedPod | None  # set for Suanpan pods in the agent's namespace


def _key(obj: Mapping[str, Any]) -> PodKey:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


class ClusterCache:
    """Nodes and pods of one cluster, and the inventory and statuses derived from them."""

    def __init__(self, catalog: Catalog, namespace: str) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.changed = asyncio.Event()
        self.node_store = Store(self._replace_nodes, self._upsert_node, self._remove_node)
        self.pod_store = Store(self._replace_pods, self.upsert_pod, self._remove_pod)
        self._nodes: dict[str, NodeView] = {}
        self._pods: dict[PodKey, _Pod] = {}
        self._on_node: defaultdict[str, set[PodKey]] = defaultdict(set)
        self._infos: dict[str, NodeInfo] = {}  # memoized node_info of clean nodes
        self._gone: deque[str] = deque(maxlen=GONE_MEMORY)

    # --- derived views -------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        """Every node with its use, by name."""
        for name, view in self._nodes.items():
            if name not in self._infos:
                pods = (self._pods[k].info for k in self._on_node.get(name, ()))
                self._infos[name] = node_info(view, pods)
        return [self._infos[name] for name in sorted(self._nodes)]

    def pods(self) -> list[PodStatus]:
        """Suanpan's pods in the namespace, by name."""
        statuses = []
        for pod in self._pods.values():
            if pod.managed is not None:
                view = self._nodes.get(pod.managed.node)
                statuses.append(pod_status(pod.managed, view.ready if view else None))
        return sorted(statuses, key=lambda s: s.name)

    def has_pod(self, namespace: str, name: str) -> bool:
        """Whether the pod is known."""
        return (namespace, name) in self._pods

    def managed(self, name: str) -> ManagedPod | None:
        """A Suanpan pod of the namespace by name."""
        pod = self._pods.get((self.namespace, name))
        return pod.managed if pod else None

    def placement_pods(self, job: str, epoch: int) -> list[ManagedPod]:
        """The Suanpan pods of one placement."""
        return [
            p.managed
            for p in self._pods.values()
            if p.managed is not None and (p.managed.job, p.managed.epoch) == (job, epoch)
        ]

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

    def _parse(self, pod: Mapping[str, Any]) -> _Pod:
        ours = _key(pod)[0] == self.namespace
        return _Pod(pod_info(self.catalog, pod), managed_pod(pod) if ours else None)

    def _replace_pods(self, pods: list[dict[str, Any]]) -> None:
        self._pods = {_key(p): self._parse(p) for p in pods}
        self._on_node.clear()
        for key, pod in self._pods.items():
            if pod.info.node:
                self._on_node[pod.info.node].add(key)
        self._infos.clear()
        self.changed.set()

    def _touch(self, old: _Pod | None, new: _Pod | None) -> None:
        """Invalidate what a pod's change affects and say whether the agent should look."""
        infos = [p.info for p in (old, new) if p is not None]
        if len(infos) == 1 or infos[0] != infos[-1]:
            for node in {i.node for i in infos} - {""}:
                self._infos.pop(node, None)
                self.changed.set()
        if (old.managed if old else None) != (new.managed if new else None):
            self.changed.set()

    def upsert_pod(self, pod: dict[str, Any]) -> None:
        """Add or update a pod (from the watch, or the answer to our own create)."""
        key, new = _key(pod), self._parse(pod)
        old = self._pods.get(key)
        if old is not None and old.info.node != new.info.node:
            self._on_node[old.info.node].discard(key)
        if new.info.node:
            self._on_node[new.info.node].add(key)
        self._pods[key] = new
        self._touch(old, new)

    def upsert_created(self, pod: dict[str, Any]) -> None:
        """Record a pod we just created unless the watch already knows it or saw it go."""
        uid = (pod.get("metadata") or {}).get("uid", "")
        if _key(pod) not in self._pods and uid not in self._gone:
            self.upsert_pod(pod)

    def _remove_pod(self, pod: dict[str, Any]) -> None:
        key = _key(pod)
        self._gone.append((pod.get("metadata") or {}).get("uid", ""))
        old = self._pods.pop(key, None)
        if old is not None:
            self._on_node[old.info.node].discard(key)
            self._touch(old, None)
