"""The discovery round and its periodic loop; Kubernetes access is injected."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.node_labels import compute_labels, labels_patch
from cluster_agents.discovery.runner import ToolFailed, ToolMissing, ToolRunner
from cluster_agents.discovery.tools import PROBES
from federation.catalog import labels as L
from federation.catalog.index import Catalog

log = logging.getLogger(__name__)

ReadLabels = Callable[[], Awaitable[Mapping[str, str]]]
PatchLabels = Callable[[Mapping[str, str | None]], Awaitable[None]]


async def discover(
    runner: ToolRunner, probes: Sequence[Probe] = PROBES, time_limit: float = 30.0
) -> list[DiscoveredDevice]:
    """Every device the vendor tools report; a missing tool means no devices of its vendor.

    Raises ToolFailed when a present tool fails or prints what its parser cannot read.
    """
    devices: list[DiscoveredDevice] = []
    for probe in probes:
        try:
            outputs = [await runner(command, time_limit) for command in probe.commands]
        except ToolMissing:
            continue
        try:
            devices.extend(probe.parse(outputs))
        except (ValueError, IndexError, KeyError) as exc:
            raise ToolFailed(f"{probe.tool}: unreadable output: {exc!r}") from exc
    return devices


class DiscoveryLoop:
    """Keeps one node's discovery labels in step with what the vendor tools report."""

    def __init__(
        self,
        catalog: Catalog,
        runner: ToolRunner,
        read_labels: ReadLabels,
        patch_labels: PatchLabels,
        *,
        probes: Sequence[Probe] = PROBES,
        time_limit: float = 30.0,
    ) -> None:
        self.catalog = catalog
        self.runner = runner
        self.read_labels = read_labels
        self.patch_labels = patch_labels
        self.probes = probes
        self.time_limit = time_limit
        self._known: dict[str, str] | None = None  # the node's discovery labels as last seen

    async def run_once(self) -> bool:
        """One round: discover, then patch the node if its labels differ. True if patched.

        A failing tool is logged and leaves the labels as they are.
        """
        try:
            devices = await discover(self.runner, self.probes, self.time_limit)
        except ToolFailed as exc:
            log.warning("discovery failed, node labels left unchanged: %s", exc)
            return False
        desired = compute_labels(devices, self.catalog)
        if self._known is None:
            current = await self.read_labels()
            self._known = {k: current[k] for k in L.ALL if k in current}
        patch = labels_patch(self._known, desired)
        if not patch:
            return False
        await self.patch_labels(patch)
        log.info("node labels updated: %s", patch)
        self._known = dict(desired)
        return True

    async def run_forever(self, interval: float, stop: asyncio.Event) -> None:
        """Run rounds every `interval` seconds until `stop` is set.

        A round that fails (say the API server is unreachable) is logged; the next one reads
        the node's labels afresh.
        """
        while not stop.is_set():
            try:
                await self.run_once()
            except Exception:
                log.exception("discovery round failed")
                self._known = None
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
