"""The chaos suite's pod-level invariants, sampled from a real cluster's apiserver beside the
hub's database throughout a run:

- no node's devices are over its capacity (every pod bound to it counts, Suanpan's or not);
- an *exclusive* job never runs pods of two epochs at once: neither two epochs here, nor an
  old epoch here while the hub has it Running at a newer one elsewhere;
- a *fast* job's double-run windows (the same situations) are counted and timed, and each must
  close within `FENCE_BOUND_S` of the faults healing (the returning agent fences them).

The apiserver being down (a fault) only skips samples.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import sqlalchemy as sa

from deploy.local.clusters import ClusterState
from deploy.local.kube import KubeClient, KubeError
from federation.aio import sleep_unless_stopped
from federation.catalog import parse_quantity
from federation.store.database import DATABASE_DOWN, Database
from federation.store.tables import clusters, jobs
from federation.wire import annotations as ann

# an agent's session back-off tops at 30 s with jitter (45 s), then one reconciliation
FENCE_BOUND_S = 60.0
SAMPLE_S = 0.5


@dataclass(frozen=True)
class HubJob:
    """What the hub holds of a job."""

    epoch: int
    state: str
    cluster: str | None
    policy: str


def device_use(pods: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """Extended resources (names with a `/`) that bound, unfinished pods take, by node."""
    used: Counter[tuple[str, str]] = Counter()
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node or pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for container in pod["spec"].get("containers", []):
            for name, amount in (container.get("resources", {}).get("limits") or {}).items():
                if "/" in name:
                    used[(node, name)] += int(parse_quantity(str(amount)))
    return used


def over_capacity(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[str]:
    """Nodes whose extended resources are taken beyond their allocatable amount."""
    allocatable = {n["metadata"]["name"]: n["status"].get("allocatable", {}) for n in nodes}
    return [
        f"node {node}: {used} {name} taken of {allocatable[node][name]}"
        for (node, name), used in device_use(pods).items()
        if name in allocatable.get(node, {})
        and used > int(parse_quantity(str(allocatable[node][name])))
    ]


def double_runs(
    pods: list[dict[str, Any]], hub: Mapping[str, HubJob], cluster: str
) -> dict[str, str]:
    """Jobs running twice, seen from this cluster: pods of two epochs running here, or of an
    older epoch here while the hub has the job Running at a newer one elsewhere; job -> why."""
    running: defaultdict[str, set[int]] = defaultdict(set)
    for pod in pods:
        labels = pod["metadata"].get("labels", {})
        if pod["status"].get("phase") == "Running" and ann.JOB_LABEL in labels:
            running[labels[ann.JOB_LABEL]].add(int(labels[ann.EPOCH_LABEL]))
    doubled = {}
    for job, epochs in running.items():
        held = hub.get(job)
        if len(epochs) > 1:
            doubled[job] = f"epochs {sorted(epochs)} running here"
        elif (
            held is not None
            and held.state == "Running"
            and held.cluster != cluster
            and min(epochs) < held.epoch
        ):
            doubled[job] = f"epoch {min(epochs)} running here, epoch {held.epoch} on {held.cluster}"
    return doubled


@dataclass
class PodWatch:
    """Samples one real cluster (named `cluster` at the hub) until stopped."""

    cs: ClusterState
    cluster: str
    db: Database
    violations: list[str] = field(default_factory=list)
    windows: list[float] = field(default_factory=list)  # closed fast double runs, seconds
    samples: int = 0
    faults: int = 0  # faults in progress
    quiet_since: float = field(default_factory=time.monotonic)  # when the last one healed
    _open: dict[str, float] = field(default_factory=dict)  # job -> double run first seen
    _said: set[str] = field(default_factory=set)

    @property
    def open_windows(self) -> int:
        """Fast jobs running twice right now."""
        return len(self._open)

    def fault(self, begins: bool) -> None:
        """A fault begins or heals."""
        self.faults += 1 if begins else -1
        if not begins:
            self.quiet_since = time.monotonic()

    async def run(self, stop: asyncio.Event) -> None:
        """Sample every `SAMPLE_S` until `stop`."""
        async with KubeClient(self.cs.apiserver_url, self.cs.token, self.cs.ca_file) as kc:
            while not stop.is_set():
                try:
                    await self.sample(kc)
                except (KubeError, aiohttp.ClientError, *DATABASE_DOWN):
                    pass  # the apiserver (or the database) is down: a fault; sampled later
                except sa.exc.DBAPIError:  # a connection a database restart left unusable
                    await self.db.engine.dispose()
                await sleep_unless_stopped(stop, SAMPLE_S)

    async def sample(self, kc: KubeClient) -> None:
        """Read the cluster and the hub once and check."""
        nodes = (await kc.get("/api/v1/nodes"))["items"]
        pods = (await kc.get("/api/v1/pods"))["items"]
        hub = await self._hub()
        now = time.monotonic()
        self.samples += 1
        for problem in over_capacity(nodes, pods):
            self._violation(f"devices over capacity: {problem}")
        doubled = double_runs(pods, hub, self.cluster)
        for job, why in doubled.items():
            held = hub.get(job)
            if held is not None and held.policy == "exclusive":
                self._violation(f"exclusive job {job} runs twice: {why}")
            else:
                since = self._open.setdefault(job, now)
                if not self.faults and now - max(since, self.quiet_since) > FENCE_BOUND_S:
                    self._violation(
                        f"fast job {job} still runs twice {FENCE_BOUND_S:.0f} s after the faults"
                        f" healed: {why}"
                    )
        for job in [j for j in self._open if j not in doubled]:
            self.windows.append(now - self._open.pop(job))

    async def _hub(self) -> dict[str, HubJob]:
        policy = sa.func.coalesce(jobs.c.compiled["failover"].astext, "fast")
        async with self.db.connection() as conn:
            rows = await conn.execute(
                sa.select(jobs.c.id, jobs.c.epoch, jobs.c.state, clusters.c.name, policy).join(
                    clusters, clusters.c.id == jobs.c.cluster_id, isouter=True
                )
            )
            return {str(r[0]): HubJob(r[1], r[2], r[3], r[4]) for r in rows}

    def _violation(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.violations.append(text)
