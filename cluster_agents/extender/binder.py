"""Bind: choose exact devices on the chosen node and create a Binding that carries them.

The choice is re-checked against the cache (which may have moved since filter) plus the
reservations of binds in flight, and the devices are reserved, with no `await` in between:
on the event loop that is one critical section per node, so two pods can never be given the
same device, whatever the order in which kube-scheduler's binding goroutines arrive. Only then
is the Binding created; its `DEVICES` / `BOUND_NODE` annotations are merged into the pod by
the apiserver in the same update that sets `spec.nodeName` (one write, never a bound pod
without its devices or an annotated pod left unbound). A failure releases the reservation.

No lock is held across the API call: packing policies send bursts of pods to one node, and a
per-node lock held over the round trips serialized them (2 s mean bind latency at 500 pods).
A second bind of the same pod while one is in flight (kube-scheduler retries after its HTTP
timeout) is refused instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cluster_agents.extender.cache import Cache, Reservation
from cluster_agents.extender.decide import choose
from cluster_agents.extender.wire import BindingArgs
from cluster_agents.kube.pods import format_devices, pod_info
from federation.scheduling.devices import Preference
from federation.wire import annotations as wire


class APIError(Exception):
    """A Kubernetes API call failed (HTTP status 0 when the server was not reached)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class PodAPI(Protocol):
    """The pod calls a bind needs."""

    async def read_pod(self, namespace: str, name: str) -> Mapping[str, Any]:
        """The pod's JSON."""
        ...

    async def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> None:
        """Create the Binding of the pod with this uid to `node`, merging `annotations`."""
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
        self._in_flight: set[str] = set()  # uids being bound

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
            try:
                await self.api.bind(ns, name, uid, node, {})
            except APIError as exc:
                return BindOutcome(f"binding {ns}/{name} to {node} failed: {exc}")
            return BindOutcome()
        if uid in self._in_flight:
            return BindOutcome(f"a bind of {ns}/{name} is already in flight")
        model, decision = choose(self.cache, demand, node, self.prefer)
        if not decision.ok:
            return BindOutcome(f"bind conflict on {node}: {decision.reason}", True)
        held = decision.devices
        reservation = Reservation(
            node, model, demand.request, held, demand.cpu_milli, demand.memory_mib
        )
        self.cache.reserve(uid, reservation)  # no await since choose(): nothing came between
        self._in_flight.add(uid)
        try:
            notes = {wire.DEVICES: format_devices(held), wire.BOUND_NODE: node}
            await self.api.bind(ns, name, uid, node, notes)
        except APIError as exc:
            self.cache.release(uid)
            return BindOutcome(f"binding {ns}/{name} to {node} failed: {exc}")
        finally:
            self._in_flight.discard(uid)
        return BindOutcome(devices=held)
