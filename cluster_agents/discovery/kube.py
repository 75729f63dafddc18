"""The thin Kubernetes side of discovery: read and patch this node's labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class NodeLabels:
    """One node's labels through a kubernetes_asyncio `CoreV1Api`."""

    def __init__(self, core_v1: Any, node_name: str) -> None:
        self.core_v1 = core_v1
        self.node_name = node_name

    async def read(self) -> Mapping[str, str]:
        """The node's current labels."""
        node = await self.core_v1.read_node(self.node_name)
        return dict(node.metadata.labels or {})

    async def patch(self, labels: Mapping[str, str | None]) -> None:
        """Strategic-merge-patch the labels; a None value removes the label."""
        await self.core_v1.patch_node(self.node_name, {"metadata": {"labels": dict(labels)}})
