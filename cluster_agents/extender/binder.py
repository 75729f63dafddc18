"""Bind: choose exact devices on the chosen node, annotate the pod, create the Binding.

Binds to one node run one at a time under a per-node asyncio lock: the choice is re-checked
against the cache (which may have moved since filter) plus the reservations of binds in
flight, the devices are reserved, then the pod gets `DEVICES` / `BOUND_NODE` and the Binding
is created. A failure releases the reservation. Two pods can therefore never be given the
same device, whatever the order in which kube-scheduler's binding goroutines arrive.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cluster_agents.extender.cache import Cache, Reservation
from cluster_agents.extender.decide import choose
from cluster_agents.extender.demand import format_devices, pod_info
from cluster_agents.extender.wire import BindingArgs
from federation.scheduling.devices import Preference
from federation.wire import annotations as wire


class APIError(Exception):
    """A Kubernetes API call failed (HTTP status 0 when the server was not reached)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class PodAPI(Protocol):
    """The three pod calls a bind needs."""

    async def read_pod(self, namespace: str, name: str) -> Mapping[str, Any]:
        """The pod's JSON."""
        ...

    async def annotate(
        self, namespace: str, name: str, uid: str, annotations: Mapping[str, str]
    ) -> None:
        """Merge `annotations` into the pod with this uid."""
        ...

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Create the pod's Binding to `node`."""
        ...


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """Result of one bind: an error message ("" on success), whether it was a device conflict,
    and the devices given."""

    error: str = ""
    conflict: bool = False
    devices: tuple[int, ...] = ()


class Binder:
    """Binds pods with exact devices, safe against concurrent binds."""

    def __init__(self, cache: Cache, api: PodAPI, prefer: Preference = "pack") -> None:
        self.cache = cache
        self.api = api
        self.prefer = prefer
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def bind(self, args: BindingArgs) -> BindOutcome:
        """Bind the pod `args` names to `args.node`."""
        ns, name, uid, node = args.pod_namespace, args.pod_name, args.pod_uid, args.node
        pod = self.cache.pods.get(uid)
        if pod is None:  # the watch has not caught up with a new pod yet
            try:
                pod = pod_info(self.cache.catalog, await self.api.read_pod(ns, name))
            except APIError as exc:
                return BindOutcome(f"cannot read pod {ns}/{name}: {exc}")
            if pod.uid != uid:
                return BindOutcome(f"pod {ns}/{name} has uid {pod.uid}, not {uid}")
        demand = pod.demand
        if demand is None:  # asks for nothing of ours: a plain binding
            return await self._create_binding(ns, name, uid, node)
        async with self._locks[node]:
            model, decision = choose(self.cache, demand, node, self.prefer)
            if not decision.ok:
                return BindOutcome(f"bind conflict on {node}: {decision.reason}", True)
            held = decision.devices
            self.cache.reserve(
                uid,
                Reservation(node, model, demand.request, held, demand.cpu_milli, demand.memory_mib),
            )
            try:
                notes = {wire.DEVICES: format_devices(held), wire.BOUND_NODE: node}
                await self.api.annotate(ns, name, uid, notes)
            except APIError as exc:
                self.cache.release(uid)
                return BindOutcome(f"annotating {ns}/{name} failed: {exc}")
            outcome = await self._create_binding(ns, name, uid, node)
            if outcome.error:
                self.cache.release(uid)
            return BindOutcome(outcome.error, devices=() if outcome.error else held)

    async def _create_binding(self, ns: str, name: str, uid: str, node: str) -> BindOutcome:
        try:
            await self.api.bind(ns, name, uid, node)
        except APIError as exc:
            return BindOutcome(f"binding {ns}/{name} to {node} failed: {exc}")
        return BindOutcome()
