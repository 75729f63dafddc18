"""An in-memory cluster: nodes from a profile, pods bound with the shared device-fit module and
run for a declared duration at a configurable time scale (or fail after it, with the reason
and exit code the pod's annotations give); nodes can fail.

It stands in for kube-scheduler + extender + kubelets in the demo, the simulator and the
benchmarks; everything above the backend interface is the agent's real code.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field, replace

from cluster_agents.agent.backend import (
    ClusterFacts,
    LogError,
    PodSpec,
    PodStatus,
    ShardService,
)
from cluster_agents.agent.ranktable import INITIALIZING, RankTableMount
from cluster_agents.kube.pods import DemandError, parse_device_request
from federation.catalog import Catalog, ResolvedDevices, resolve_node
from federation.compiler import cpu_milli, memory_mib
from federation.scheduling.devices import (
    DeviceRequest,
    FitCode,
    NodeDevices,
    allocate,
    fit,
    release,
)
from federation.wire import annotations as ann
from federation.wire.agent import NodeInfo, PodPhase, Taint, device_infos
from federation.wire.telemetry import DeviceTelemetry, NodeMarks

ACTIVITY = 0.9  # a running pod keeps its share of a device this busy (simulated utilization)


def exit_code(reason: str, given: str | None) -> int:
    """The exit code of a simulated failure: `given` (the `EXIT_CODE` annotation, 0 to 255),
    else 137 for OOMKilled (SIGKILL) and 1 for anything else, as the local clusters' kwok
    stage."""
    default = 137 if reason == "OOMKilled" else 1
    try:
        code = int(given) if given is not None else default
    except ValueError:
        return default
    return code if 0 <= code <= 255 else default


@dataclass(frozen=True)
class SimNodeSpec:
    """A node to simulate: labels, capacity and annotations as a real node would have them."""

    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)  # device plugins' registers


@dataclass
class _Node:
    spec: SimNodeSpec
    cpu_milli: int
    memory_mib: int
    pods: int
    devices: NodeDevices | None
    ready: bool = True
    used_cpu: int = 0
    used_mem: int = 0
    used_pods: int = 0
    ip: str = ""  # its address, given when it is added
    # its NodeInfo as last built, with the state it was built from (`_Node.state`)
    info: tuple[tuple[object, ...], NodeInfo] | None = None
    # its device readings as last made, with the devices and forced readings they came from
    telemetry: tuple[tuple[object, ...], list[DeviceTelemetry]] | None = None

    @property
    def state(self) -> tuple[object, ...]:
        """What its NodeInfo is built from and may change."""
        return (self.ready, self.used_cpu, self.used_mem, self.used_pods, self.devices)


@dataclass(frozen=True)
class Reading:
    """What a simulated device's exporter says instead of what its pods would make it say:
    a utilization (None: its pods') and a fatal reading ("": none)."""

    utilization: float | None = None
    fault: str = ""


@dataclass
class _Pod:
    spec: PodSpec
    created: float
    phase: PodPhase = "Pending"
    node: str = ""
    devices: tuple[int, ...] = ()
    request: DeviceRequest | None = None
    started: float = 0.0
    ended: float | None = None  # when it succeeded or failed: its log stops there
    reason: str = ""
    message: str = ""
    gated: bool = False
    ip: str = ""  # its address, given when it is created
    exit_code: int | None = None  # once its container ended
    leaving: float | None = None  # deleted: removed at this time (after SIGTERM, in its grace)


def _readings(node: str, d: NodeDevices, forced: tuple[Reading, ...]) -> list[DeviceTelemetry]:
    """A node's devices as its exporter reads them."""
    found = []
    for i, reading in enumerate(forced):
        own = min(100.0, d.used_milli[i] / 10 * ACTIVITY)
        utilization = own if reading.utilization is None else reading.utilization
        found.append(
            DeviceTelemetry(
                node=node,
                flavor=d.model,
                index=i,
                utilization=round(utilization, 1),
                memory_used_mib=d.used_memory_mib[i],
                memory_total_mib=d.memory_mib[i],
                temperature_c=round(32 + 0.45 * utilization, 1),
                fault=reading.fault,
            )
        )
    return found


def _shape(spec: PodSpec) -> tuple[object, ...]:
    """What decides whether a pod fits a node here: pods of one shape fit the same nodes."""
    return (
        spec.cpu_milli,
        spec.memory_mib,
        spec.annotations.get(ann.DEVICE_REQUEST),
        spec.annotations.get(ann.FLAVOR),
        spec.avoid_nodes,
    )


@dataclass
class SimulatedCluster:
    """A simulated member cluster (implements `ClusterBackend`)."""

    catalog: Catalog
    specs: list[SimNodeSpec]
    time_scale: float = 1.0  # simulated seconds per real second
    tick_s: float = 0.05
    clock: Callable[[], float] = time.monotonic
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    # set to simulate an unreachable apiserver: start and writes fail, pods keep running
    problem: str | None = None
    # its pods' addresses are 127.<64 + pod_block>.x.y: loopback, so that a test or the demo
    # can serve a pod's metrics on its address; clusters in one process take different blocks
    pod_block: int = 0

    def __post_init__(self) -> None:
        self._origin = self.clock()
        self._nodes: dict[str, _Node] = {}
        self._pods: dict[str, _Pod] = {}
        self._created = 0  # pods ever created: each gets the next address
        self._added = 0  # nodes ever added: each gets the next address
        self.rank_tables: dict[tuple[str, str], str] = {}  # (namespace, ConfigMap) -> content
        self.services: dict[tuple[str, str], ShardService] = {}  # (namespace, name) -> Service
        self.readings: dict[tuple[str, int], Reading] = {}  # (node, device) -> forced reading
        self._task: asyncio.Task[None] | None = None
        # kube-scheduler's unschedulable queue: a pod that found no node is tried again only
        # once capacity was freed or added (`_capacity` grows), not at every tick; `_misfit`
        # holds, per pod shape, the capacity count at which that shape last found no node
        self._capacity = 0
        self._misfit: dict[tuple[object, ...], int] = {}
        # what a tick looks at, so that it costs what changed, not every pod: the pods waiting
        # for a node, the nodes of each device model (None: without devices), and the times
        # at which running pods end and deleted pods go (heaps of (time, seq, pod))
        self._waiting: dict[str, _Pod] = {}
        self._arrived = 0  # pods that ever started waiting
        self._tried = (-1, -1)  # (`_capacity`, `_arrived`) when the waiting pods were last tried
        self._by_model: dict[str | None, dict[str, _Node]] = {}
        self._ending: list[tuple[float, int, _Pod]] = []
        self._leaving: list[tuple[float, int, _Pod]] = []
        self._seq = itertools.count()
        for spec in self.specs:
            self.add_node(spec)

    # --- ClusterBackend ------------------------------------------------------------------

    async def start(self) -> None:
        """Start the simulated scheduler/kubelet ticker (fails while `problem` is set)."""
        self._reach()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop the ticker."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def apiserver_problem(self) -> str | None:
        """The simulated outage, if any."""
        return self.problem

    def _reach(self) -> None:
        if self.problem is not None:
            raise ConnectionError(self.problem)

    async def facts(self) -> ClusterFacts:
        """A simulated Kubernetes version."""
        return ClusterFacts(kubernetes_version="v1.36.2-simulated")

    def now(self) -> float:
        """Simulated seconds since the cluster was created."""
        return (self.clock() - self._origin) * self.time_scale

    async def pod_logs(
        self, name: str, container: str, *, follow: bool, tail: int | None, limit_bytes: int
    ) -> AsyncGenerator[bytes, None]:
        """Synthetic lines: one per simulated second the pod has existed until it ended
        (following: one a second until it ends), within the byte limit."""
        pod = self._pods.get(name)
        if pod is None:
            raise LogError(f"no pod {name}")
        spec = pod.spec
        lines = [
            f"[{spec.task}-{spec.replica}] step {i}: running on {pod.node or 'no node'}\n"
            for i in range(int(max((pod.ended or self.now()) - pod.created, 1)))
        ]
        text = "".join(lines[-tail:] if tail is not None else lines)
        sent = text.encode()[:limit_bytes]
        yield sent
        step = len(lines)
        while follow and len(sent) < limit_bytes and name in self._pods:
            if self._pods[name].phase in ("Succeeded", "Failed"):
                break
            await asyncio.sleep(1.0)
            line = f"[{spec.task}-{spec.replica}] step {step}\n".encode()[: limit_bytes - len(sent)]
            sent += line
            step += 1
            yield line

    def nodes(self) -> list[NodeInfo]:
        """Every node with its use, devices resolved through the catalog."""
        return [self._node_info(n) for n in self._nodes.values()]

    def pods(self) -> list[PodStatus]:
        """Every pod still present."""
        return [
            PodStatus(
                name=p.spec.name,
                job=p.spec.job,
                epoch=p.spec.epoch,
                task=p.spec.task,
                replica=p.spec.replica,
                phase=p.phase,
                node=p.node,
                reason=p.reason,
                message=p.message,
                created_at=p.created,
                gated=p.gated,
                deleting=p.leaving is not None,
                host_ip=self._nodes[p.node].ip if p.node in self._nodes else "",
                pod_ip=p.ip if p.phase == "Running" else "",
                devices=p.devices,
                attempt=p.spec.attempt,
                exit_code=p.exit_code,
                ready=p.phase == "Running" and p.leaving is None,
                generation=int(p.spec.labels.get(ann.GENERATION_LABEL, 0)),
            )
            for p in self._pods.values()
        ]

    def pod_specs(self) -> list[PodSpec]:
        """What the agent asked for, per existing pod (env, hostname, ...), for reports."""
        return [p.spec for p in self._pods.values()]

    async def create_pods(self, pods: list[PodSpec]) -> None:
        """Add pods that do not exist yet."""
        self._reach()
        for spec in pods:
            if spec.name not in self._pods:
                self._created += 1
                n = self._created
                ip = f"127.{64 + (self.pod_block + n // 65536) % 64}.{n // 256 % 256}.{n % 256}"
                pod = self._pods[spec.name] = _Pod(spec, self.now(), gated=spec.gated, ip=ip)
                if not pod.gated:
                    self._wait(pod)
            if spec.rank_table is not None:
                key = (spec.namespace, spec.rank_table.config_map)
                self.rank_tables.setdefault(key, INITIALIZING)
        self._step()

    async def ungate_pods(self, names: list[str]) -> None:
        """Let gated pods be scheduled."""
        self._reach()
        for name in names:
            pod = self._pods.get(name)
            if pod is not None and pod.gated:
                pod.gated = False
                if pod.phase == "Pending" and not pod.node and pod.leaving is None:
                    self._wait(pod)
        self._step()

    async def write_rank_table(self, namespace: str, mount: RankTableMount, content: str) -> None:
        """Record the rank table's new content."""
        self._reach()
        self.rank_tables[(namespace, mount.config_map)] = content

    async def apply_service(self, service: ShardService) -> str:
        """Record the shard's Service (no cluster IP: nothing routes to it here)."""
        self._reach()
        self.services[(service.namespace, service.name)] = service
        return ""

    async def delete_pods(self, names: list[str], grace_seconds: int) -> None:
        """Remove pods, freeing what they held (and rank tables no pod mounts): at once, or,
        for a running workload that takes `STOP_SECONDS` to stop after SIGTERM, once it has
        stopped or its grace period ends, whichever comes first. The Services of placements
        whose every pod is leaving go at once."""
        self._reach()
        now = self.now()
        for name in names:
            pod = self._pods.get(name)
            if pod is None or pod.leaving is not None:
                continue
            stop_s = float(pod.spec.annotations.get(ann.STOP_SECONDS, 0))
            pod.leaving = now + min(stop_s, grace_seconds) if pod.phase == "Running" else now
            self._waiting.pop(name, None)
            heapq.heappush(self._leaving, (pod.leaving, next(self._seq), pod))
        staying = {(p.spec.job, p.spec.epoch) for p in self._pods.values() if p.leaving is None}
        self.services = {k: s for k, s in self.services.items() if (s.job, s.epoch) in staying}
        self._remove_left(now)

    def _remove_left(self, now: float) -> None:
        """Remove the deleted pods whose time has come."""
        removed = False
        while self._leaving and self._leaving[0][0] <= now:
            _, _, pod = heapq.heappop(self._leaving)
            if self._pods.get(pod.spec.name) is pod:
                self._free(self._pods.pop(pod.spec.name))
                removed = True
        if removed:
            mounted = {
                (p.spec.namespace, p.spec.rank_table.config_map)
                for p in self._pods.values()
                if p.spec.rank_table is not None
            }
            self.rank_tables = {k: v for k, v in self.rank_tables.items() if k in mounted}
        self.changed.set()

    async def telemetry(self) -> list[DeviceTelemetry]:
        """Each ready node's devices as an exporter would read them: busy as their pods'
        shares make them (`ACTIVITY`), memory as allocated, unless `readings` says otherwise
        (a node's readings are made again only when its devices or forced readings changed)."""
        found = []
        for node in self._nodes.values():
            d = node.devices
            if d is None or not node.ready:
                continue
            name = node.spec.name
            forced = tuple(self.readings.get((name, i), Reading()) for i in range(d.size))
            if node.telemetry is None or node.telemetry[0] != (d, forced):
                node.telemetry = ((d, forced), _readings(name, d, forced))
            found.extend(node.telemetry[1])
        return found

    async def mark_devices(self, node: str, marks: NodeMarks) -> None:
        """Take a node's load bands and faults into its devices (what the extender would read
        from the node annotation): devices in fault are unhealthy, loads steer shares."""
        found = self._nodes.get(node)
        if found is None or found.devices is None or found.devices.model not in marks:
            return
        d = found.devices
        load, down = marks[d.model]
        load = (load + (None,) * d.size)[: d.size]
        healthy = tuple(i not in down for i in range(d.size))
        if any(now and not before for now, before in zip(healthy, d.healthy, strict=True)):
            self._capacity += 1  # a device back in service
        found.devices = replace(d, load=load, healthy=healthy)
        self.changed.set()

    # --- fault injection and fleet changes -----------------------------------------------

    def add_node(self, spec: SimNodeSpec) -> None:
        """Add a node (as a cloud autoscaler or an operator would)."""
        resolved = [
            r
            for r in resolve_node(self.catalog, spec.labels, spec.annotations, spec.capacity)
            if isinstance(r, ResolvedDevices)
        ]
        devices = None
        if resolved:
            r = resolved[0]
            devices = NodeDevices(
                model=r.model.key,
                memory_mib=(r.memory_mib,) * r.count,
                used_milli=(0,) * r.count,
                used_memory_mib=(0,) * r.count,
                healthy=(True,) * r.count,
                topology=r.topology,
                sharing=r.model.sharing,
            )
        node = self._nodes[spec.name] = _Node(
            spec,
            cpu_milli(spec.capacity.get("cpu", "0")),
            memory_mib(spec.capacity.get("memory", "0")),
            int(spec.capacity.get("pods", "110")),
            devices,
            ip=f"10.0.{self._added // 250}.{self._added % 250 + 1}",
        )
        self._by_model.setdefault(devices.model if devices else None, {})[spec.name] = node
        self._added += 1
        self._capacity += 1
        self.changed.set()

    def remove_node(self, name: str) -> None:
        """Remove a node; its pods are lost."""
        self.fail_node(name)
        node = self._nodes.pop(name)
        del self._by_model[node.devices.model if node.devices else None][name]
        self.changed.set()

    def fail_node(self, name: str) -> None:
        """Make a node NotReady: its pods fail with reason NodeLost."""
        node = self._nodes[name]
        node.ready = False
        for pod in self._pods.values():
            if pod.node == name and pod.phase in ("Pending", "Running"):
                self._free(pod)
                pod.phase, pod.reason, pod.message = "Failed", "NodeLost", f"node {name} lost"
                pod.ended = self.now()
        self.changed.set()

    # --- simulation ----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._step()
            await asyncio.sleep(self.tick_s)

    def _step(self) -> None:
        now = self.now()
        changed = bool(self._leaving) and self._leaving[0][0] <= now
        if changed:
            self._remove_left(now)
        if (self._capacity, self._arrived) != self._tried:  # room freed or pods arrived
            self._tried = (self._capacity, self._arrived)
            waiting = sorted(
                self._waiting.values(), key=lambda p: (-p.spec.priority, p.created, p.spec.name)
            )
            for pod in waiting:
                shape = _shape(pod.spec)
                if self._misfit.get(shape) == self._capacity:
                    continue  # nothing freed since a pod of this shape found no node
                if self._bind(pod, now):
                    changed = True
                else:
                    self._misfit[shape] = self._capacity
        while self._ending and self._ending[0][0] <= now:
            _, _, pod = heapq.heappop(self._ending)
            if self._pods.get(pod.spec.name) is not pod or pod.phase != "Running":
                continue  # gone, or lost with its node
            self._free(pod)
            fail = pod.spec.annotations.get(ann.FAIL_REASON)
            if fail:
                pod.phase, pod.reason, pod.ended = "Failed", fail, now
                pod.exit_code = exit_code(fail, pod.spec.annotations.get(ann.EXIT_CODE))
                pod.message = f"container {pod.spec.container}: {fail} (exit code {pod.exit_code})"
            else:
                pod.phase, pod.ended, pod.exit_code = "Succeeded", now, 0
            changed = True
        if changed:
            self.changed.set()

    def _wait(self, pod: _Pod) -> None:
        """Queue a pod for the scheduler."""
        self._waiting[pod.spec.name] = pod
        self._arrived += 1

    def _request(self, spec: PodSpec) -> tuple[str, DeviceRequest] | None:
        raw = spec.annotations.get(ann.DEVICE_REQUEST)
        flavor = spec.annotations.get(ann.FLAVOR)
        if not raw or not flavor:
            return None
        try:
            return flavor, parse_device_request(raw)
        except DemandError:
            return None

    def _bind(self, pod: _Pod, now: float) -> bool:
        cpu, mem = pod.spec.cpu_milli, pod.spec.memory_mib
        wanted = self._request(pod.spec)
        best: tuple[int, str, tuple[int, ...]] | None = None
        nodes = self._nodes if wanted is None else self._by_model.get(wanted[0], {})
        for node in nodes.values():
            if any(x.excludes(node.spec.labels) for x in pod.spec.avoid_nodes):
                continue
            if (
                not node.ready
                or node.cpu_milli - node.used_cpu < cpu
                or node.memory_mib - node.used_mem < mem
                or node.used_pods >= node.pods
            ):
                continue
            devices: tuple[int, ...] = ()
            if wanted is not None:
                flavor, request = wanted
                if node.devices is None or node.devices.model != flavor:
                    continue
                free = sum(u == 0 for u in node.devices.used_milli)
                if best is not None and (free - request.count, node.spec.name) > best[:2]:
                    continue  # cannot fit tighter than the best so far: spare the fit
                result = fit(node.devices, request)
                if result.code is not FitCode.OK:
                    continue
                devices = result.devices
                free_after = free - len(devices)
            else:
                free_after = 10_000 if node.devices is None else 10_000 + node.devices.size
            candidate = (free_after, node.spec.name, devices)
            if best is None or candidate < best:
                best = candidate  # best fit: the node left with the fewest free devices
        if best is None:
            pod.reason = "Unschedulable"
            return False
        _, name, devices = best
        node = self._nodes[name]
        node.used_cpu += cpu
        node.used_mem += mem
        node.used_pods += 1
        if wanted is not None and node.devices is not None:
            node.devices = allocate(node.devices, wanted[1], devices)
            pod.request = wanted[1]
        pod.node, pod.devices, pod.phase, pod.started, pod.reason = (
            name,
            devices,
            "Running",
            now,
            "",
        )
        del self._waiting[pod.spec.name]
        run_s = pod.spec.annotations.get(ann.RUN_SECONDS)
        if pod.spec.annotations.get(ann.FAIL_REASON) or run_s is not None:
            heapq.heappush(self._ending, (now + float(run_s or 0), next(self._seq), pod))
        return True

    def _free(self, pod: _Pod) -> None:
        node = self._nodes.get(pod.node)
        if node is None or pod.phase not in ("Pending", "Running") or not pod.node:
            return
        self._capacity += 1
        node.used_cpu -= pod.spec.cpu_milli
        node.used_mem -= pod.spec.memory_mib
        node.used_pods -= 1
        if pod.request is not None and node.devices is not None:
            node.devices = release(node.devices, pod.request, pod.devices)

    def _node_info(self, node: _Node) -> NodeInfo:
        """The node as the agent sees it, built again only when it changed (as the Kubernetes
        backend's cache does): the agent reads every node at each telemetry and inventory pass."""
        state = node.state
        if node.info is not None and node.info[0] == state:
            return node.info[1]
        devices = device_infos(node.devices) if node.devices is not None else []
        info = NodeInfo(
            name=node.spec.name,
            labels=dict(node.spec.labels),
            taints=[] if node.ready else [Taint(key="node.kubernetes.io/unreachable")],
            ready=node.ready,
            cpu_milli=node.cpu_milli,
            memory_mib=node.memory_mib,
            pods=node.pods,
            used_cpu_milli=node.used_cpu,
            used_memory_mib=node.used_mem,
            used_pods=node.used_pods,
            devices=devices,
        )
        node.info = (state, info)
        return info
