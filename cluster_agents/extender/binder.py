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
timeout) is refused instead, and so is one after a bind that went through but that the watch
has not shown yet: choosing again would have replaced the reservation of the devices the pod
was bound with, and handed them out a second time.

The Binding also carries what the vendor's device plugin reads to allocate exactly those
devices (`cluster_agents.kube.allocation`, per the catalog's `allocation` record).

Gangs (`GANG`, `GANG_SIZE`): a member's devices are reserved and its bind waits until every
member of the gang reached bind (or is bound already and running or succeeded: a replica run
again in place after a failure binds at once); then all Bindings are created together.
After `gang_wait_s` (below kube-scheduler's extender `httpTimeout`) every waiting member fails
its bind and releases its reservation; kube-scheduler retries them. Filter stays pure: the
reservations of waiting members are what later filters see.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cluster_agents.extender.cache import Cache, Reservation
from cluster_agents.extender.decide import choose
from cluster_agents.extender.wire import BindingArgs
from cluster_agents.kube.allocation import allocation_annotations
from cluster_agents.kube.pods import PodInfo, format_devices, pod_info
from federation.scheduling.devices import DeviceRequest, Preference
from federation.wire import annotations as wire

log = logging.getLogger(__name__)


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
    """Result of one bind: an error message ("" on success), whether it was a device conflict
    or its gang timed out, and the devices given."""

    error: str = ""
    conflict: bool = False
    devices: tuple[int, ...] = ()
    gang_timeout: bool = False


@dataclass(slots=True)
class _Member:
    """A gang member whose devices are reserved, waiting for the rest of its gang."""

    pod: PodInfo
    node: str
    notes: dict[str, str]
    devices: tuple[int, ...]
    done: asyncio.Future[BindOutcome]


class Binder:
    """Binds pods with exact devices, safe against concurrent binds; gangs bind whole."""

    def __init__(
        self,
        cache: Cache,
        api: PodAPI,
        prefer: Preference = "pack",
        *,
        gang_wait_s: float = 20.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.api = api
        self.prefer = prefer
        self.gang_wait_s = gang_wait_s
        self._clock = clock
        self._in_flight: set[str] = set()  # uids being bound
        self._gangs: dict[str, dict[str, _Member]] = {}  # gang -> uid -> member waiting
        self._since: dict[str, float] = {}  # gang -> when its first waiting member arrived

    async def bind(self, args: BindingArgs) -> BindOutcome:
        """Bind the pod `args` names to `args.node` (a gang member: with its whole gang)."""
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
        held_by = self.cache.reservation(uid)
        if pod.node or held_by is not None:  # a retry of a bind that went through
            bound = pod.node or (held_by.node if held_by else "")
            return BindOutcome(f"pod {ns}/{name} is already bound to {bound}")
        model, decision = choose(self.cache, demand, node, self.prefer, pod.hint)
        if not decision.ok:
            return BindOutcome(f"bind conflict on {node}: {decision.reason}", True)
        held = decision.devices
        reservation = Reservation(
            node, model, demand.request, held, demand.cpu_milli, demand.memory_mib
        )
        self.cache.reserve(uid, reservation)  # no await since choose(): nothing came between
        self._in_flight.add(uid)
        try:
            notes = self._notes(pod, node, model, demand.request, held)
            done: asyncio.Future[BindOutcome] = asyncio.get_running_loop().create_future()
            member = _Member(pod, node, notes, held, done)
            if pod.gang:
                return await self._gang(member)
            return await self._create(member)
        finally:
            self._in_flight.discard(uid)

    def _notes(
        self, pod: PodInfo, node: str, model: str, request: DeviceRequest, held: tuple[int, ...]
    ) -> dict[str, str]:
        """Our annotations plus what the vendor's device plugin reads (catalog `allocation`)."""
        notes = {wire.DEVICES: format_devices(held), wire.BOUND_NODE: node}
        inventory = self.cache.nodes[node]
        resolved = inventory.model(model)
        assert resolved is not None  # choose() found the model on the node
        allocation, ids = inventory.allocation(resolved)
        if allocation is not None:
            notes |= allocation_annotations(
                allocation,
                ids=[ids[i] for i in held],
                request=request,
                device_memory_mib=resolved.memory_mib,
                node=node,
                slot=pod.device_slot,
                slots=pod.slots,
                now=self._clock(),
            )
        return notes

    async def _create(self, member: _Member) -> BindOutcome:
        """Create the member's Binding; release its reservation if that fails."""
        pod = member.pod
        try:
            await self.api.bind(pod.namespace, pod.name, pod.uid, member.node, member.notes)
        except APIError as exc:
            self.cache.release(pod.uid)
            return BindOutcome(f"binding {pod.namespace}/{pod.name} to {member.node} failed: {exc}")
        return BindOutcome(devices=member.devices)

    def _missing(self, gang: str, size: int) -> int:
        """Members of the gang neither bound (as the cache shows: running, or finished with
        success) nor waiting here. A failed member's pod does not count: the agent runs its
        replica again in place (its new pod binds alone while its peers run), or the job
        fails."""
        waiting = self._gangs.get(gang, {})
        bound = sum(
            1
            for p in self.cache.pods.values()
            if p.gang == gang and p.node and (p.active or p.succeeded) and p.uid not in waiting
        )
        return size - bound - len(waiting)

    async def _gang(self, member: _Member) -> BindOutcome:
        """Wait until every member of the gang reached bind, then create all Bindings together;
        after `gang_wait_s` without that, every waiting member fails and releases its devices."""
        gang, size, uid = member.pod.gang, member.pod.gang_size, member.pod.uid
        self._gangs.setdefault(gang, {})[uid] = member
        self._since.setdefault(gang, time.monotonic())
        if self._missing(gang, size) <= 0:
            await asyncio.shield(self._complete(gang))
            return member.done.result()
        try:
            return await asyncio.wait_for(asyncio.shield(member.done), self.gang_wait_s)
        except TimeoutError:
            if uid in self._gangs.get(gang, {}):  # no completion under way
                if self._missing(gang, size) <= 0:  # the watch caught up with bound members
                    await asyncio.shield(self._complete(gang))
                else:
                    self._fail(
                        gang,
                        f"gang {gang}: not all {size} members reached bind "
                        f"within {self.gang_wait_s:g} s",
                    )
            return await asyncio.shield(member.done)
        finally:
            if not member.done.done() and uid in self._gangs.get(gang, {}):  # cancelled
                del self._gangs[gang][uid]
                self.cache.release(uid)
                if not self._gangs[gang]:
                    del self._gangs[gang]
                    self._since.pop(gang, None)

    def _complete(self, gang: str) -> asyncio.Task[None]:
        """Take every waiting member of the gang and create their Bindings at once."""
        members = list(self._gangs.pop(gang, {}).values())
        waited = time.monotonic() - self._since.pop(gang, time.monotonic())
        log.info("gang %s: binding %d members after %.0f ms", gang, len(members), waited * 1000)

        async def create_all() -> None:
            outcomes = await asyncio.gather(*(self._create(m) for m in members))
            for m, outcome in zip(members, outcomes, strict=True):
                m.done.set_result(outcome)

        return asyncio.create_task(create_all())

    def _fail(self, gang: str, error: str) -> None:
        """Fail every waiting member of the gang and release its reservation."""
        self._since.pop(gang, None)
        log.warning("%s", error)
        for m in self._gangs.pop(gang, {}).values():
            self.cache.release(m.pod.uid)
            if not m.done.done():
                m.done.set_result(BindOutcome(error, gang_timeout=True))
