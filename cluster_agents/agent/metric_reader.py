"""The scaling metric of autoscaled service shards, read from their ready pods.

Every `interval_s` each ready pod of an autoscaled shard is read at
`http://<pod IP>:<port><path>` (1 s timeout, a bounded number at a time); the samples named
the metric on its page (every label set) are summed into the shard's `Reading`, and the pod
counts as sampled. A pod that does not answer in time, answers an error, serves an unparsable
page or lacks the metric is just not sampled.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from cluster_agents.agent.serving import Reading
from federation.aio import sleep_unless_stopped

log = logging.getLogger(__name__)

Placement = tuple[str, int]  # job, epoch


def metric_total(text: str, metric: str) -> float | None:
    """The sum of the samples named `metric` in a Prometheus text page (None: none, a value
    that is not finite, or a page that does not parse)."""
    try:
        values = [
            s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == metric
        ]
    except ValueError:
        return None
    if not values or not all(math.isfinite(v) for v in values):
        return None
    return float(sum(values))


def pod_url(ip: str, port: int, path: str) -> str:
    """The metric page of a pod at `ip` (v4 or v6)."""
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}{path}"


@dataclass(frozen=True)
class Target:
    """An autoscaled shard: its metric and the pages of its ready pods."""

    placement: Placement
    metric: str
    urls: tuple[str, ...]


class MetricReader:
    """Reads the targets `targets()` gives every `interval_s` into `readings`, and calls
    `changed()` when a reading changed."""

    def __init__(
        self,
        targets: Callable[[], list[Target]],
        changed: Callable[[], None],
        *,
        interval_s: float = 5.0,
        timeout_s: float = 1.0,
        concurrency: int = 32,
    ) -> None:
        self.targets = targets
        self.changed = changed
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.readings: dict[Placement, Reading] = {}
        self._limit = asyncio.Semaphore(concurrency)

    async def run(self, stop: asyncio.Event) -> None:
        """Read every `interval_s` until `stop` is set."""
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not stop.is_set():
                await self.read(session)
                await sleep_unless_stopped(stop, self.interval_s)

    async def read(self, session: aiohttp.ClientSession) -> None:
        """Read every target once."""
        targets = self.targets()
        totals = await asyncio.gather(
            *(self._total(session, url, t.metric) for t in targets for url in t.urls)
        )
        readings: dict[Placement, Reading] = {}
        values = iter(totals)
        for target in targets:
            read = [v for v in (next(values) for _ in target.urls) if v is not None]
            readings[target.placement] = Reading(sum(read), len(read))
        if readings != self.readings:
            self.readings = readings
            self.changed()

    async def _total(self, session: aiohttp.ClientSession, url: str, metric: str) -> float | None:
        async with self._limit:
            try:
                async with session.get(url) as response:
                    response.raise_for_status()
                    text = await response.text()
            except (aiohttp.ClientError, TimeoutError, UnicodeDecodeError) as exc:
                log.debug("metric of %s not read: %r", url, exc)
                return None
        total = metric_total(text, metric)
        if total is None:
            log.debug("%s serves no %s", url, metric)
        return total
