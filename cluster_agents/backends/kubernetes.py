"""The agent's backend for a real Kubernetes cluster (kubernetes_asyncio).

Nodes and pods of the whole cluster are listed and watched into a `ClusterCache`, from which
`nodes()` and `pods()` answer without I/O. Pods are created in their tenant's namespace
(`federation.k8s_names.tenant_namespace` of the agent's `namespace` prefix), which the
backend creates, labelled as Suanpan's, before the tenant's first pod, under one owner
ConfigMap per (job, epoch) and with a PriorityClass per hub priority class; see
docs/agent-kubernetes.md for the RBAC this needs and how occupancy is computed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Iterable
from typing import Any

import aiohttp
from kubernetes_asyncio.client import (
    ApiClient,
    ApiException,
    CoreV1Api,
    SchedulingV1Api,
    V1Namespace,
    V1ObjectMeta,
    V1OwnerReference,
    VersionApi,
)
from prometheus_client import CollectorRegistry

from cluster_agents.agent.backend import ClusterFacts, LogError, PodSpec, PodStatus, ShardService
from cluster_agents.agent.exporters import (
    ExporterPods,
    ExporterTarget,
    device_readings,
    scrape,
)
from cluster_agents.agent.ranktable import INITIALIZING, RankTableMount
from cluster_agents.backends.k8s_cache import ClusterCache
from cluster_agents.backends.k8s_render import (
    owner_name,
    owner_reference,
    placement_selector,
    render_owner,
    render_pod,
    render_priority_class,
    render_rank_table,
    render_service,
    render_shard_service,
)
from cluster_agents.kube.api import JSON, KubeAPIError, call
from cluster_agents.kube.client import connect
from cluster_agents.kube.metrics import BackendMetrics
from cluster_agents.kube.watch import Reflector
from federation.catalog import Catalog
from federation.wire import annotations as ann
from federation.wire.agent import NodeInfo
from federation.wire.telemetry import ANNOTATION, DeviceTelemetry, NodeMarks, encode_marks

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0


class KubernetesBackend:
    """`ClusterBackend` over a real cluster: list+watch for reads, the API for writes.

    `kubeconfig` None means in-cluster configuration (the agent's service account); `prefix`
    names the tenant namespaces (the agent's `--namespace`).
    Metrics go to `registry` (a private one when None), see `BackendMetrics`.
    """

    def __init__(
        self,
        kubeconfig: str | None,
        prefix: str,
        catalog: Catalog,
        *,
        clock: Callable[[], float] = time.time,
        registry: CollectorRegistry | None = None,
        concurrency: int = 16,
        exporters: tuple[ExporterTarget, ...] = (),
        exporter_pods: tuple[ExporterPods, ...] = (),
    ) -> None:
        self.kubeconfig = kubeconfig
        self.exporters = exporters  # the device exporters `telemetry` reads, and the pods
        self.exporter_pods = exporter_pods  # found by label it reads too
        self._profiles = catalog.telemetry_profiles()
        self._scraper: aiohttp.ClientSession | None = None
        self.prefix = prefix  # of the tenant namespaces
        self.metrics = BackendMetrics(registry)
        self.watches: dict[str, Reflector] = {}  # "nodes", "pods"
        self._clock = clock
        self._cache = ClusterCache(catalog, prefix)
        self.changed = self._cache.changed
        self._limit = asyncio.Semaphore(concurrency)
        self._api: ApiClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._priority_classes: set[str] = set()  # known to exist
        self._namespaces: set[str] = set()  # tenant namespaces known to exist

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, list nodes and pods, start watching."""
        self._api = await connect(self.kubeconfig)
        try:
            core = self._core
            self.watches = {
                resource: Reflector(resource, lister, store, self.metrics, self._clock)
                for resource, lister, store in (
                    ("nodes", core.list_node, self._cache.node_store),
                    ("pods", core.list_pod_for_all_namespaces, self._cache.pod_store),
                )
            }
            await asyncio.gather(*(w.sync() for w in self.watches.values()))
        except BaseException:
            await self.stop()
            raise
        self._tasks = [
            asyncio.create_task(w.run(), name=f"watch-{w.resource}") for w in self.watches.values()
        ]

    async def stop(self) -> None:
        """Stop watching and close the connections."""
        if self._scraper is not None:
            await self._scraper.close()
            self._scraper = None
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._api is not None:
            await self._api.close()
            self._api = None

    # --- reads ---------------------------------------------------------------------------

    async def facts(self) -> ClusterFacts:
        """The apiserver's version."""
        _, body = await self._call(VersionApi(self._client).get_code)
        return ClusterFacts(kubernetes_version=str(body.get("gitVersion", "")))

    def apiserver_problem(self) -> str | None:
        """The first broken list/watch, if any."""
        if not self.watches:
            return "not started"
        return next((w.problem for w in self.watches.values() if w.problem), None)

    def nodes(self) -> list[NodeInfo]:
        """Every node with allocatable, what all its pods use, and its devices."""
        return self._cache.nodes()

    def pods(self) -> list[PodStatus]:
        """Suanpan's pods in the agent's namespaces."""
        return self._cache.pods()

    def now(self) -> float:
        """Wall-clock seconds."""
        return self._clock()

    # --- writes --------------------------------------------------------------------------

    async def create_pods(self, pods: list[PodSpec]) -> None:
        """Create the pods not known yet (and their tenants' namespaces); one that already
        exists (409) is left alone."""
        todo = [p for p in pods if not self._cache.has_pod(p.namespace, p.name)]
        classes = {p.priority_class: p.priority for p in todo if p.priority_class}
        namespaces = {p.namespace: p.tenant for p in todo}
        await self._each(
            [
                *(
                    self._ensure_priority_class(name, value)
                    for name, value in classes.items()
                    if name not in self._priority_classes
                ),
                *(
                    self._ensure_namespace(name, tenant)
                    for name, tenant in namespaces.items()
                    if name not in self._namespaces
                ),
            ]
        )
        placements: defaultdict[tuple[str, str, int], list[PodSpec]] = defaultdict(list)
        for spec in todo:
            placements[(spec.namespace, spec.job, spec.epoch)].append(spec)
        await self._each(self._create_placement(*key, specs) for key, specs in placements.items())

    async def delete_pods(self, names: list[str], grace_seconds: int) -> None:
        """Delete Suanpan's pods (gone already or unknown is fine), then the owners left empty."""
        managed = [m for m in map(self._cache.managed, names) if m is not None]
        await self._each(self._delete_pod(m.namespace, m.name, grace_seconds) for m in managed)
        leaving = set(names)
        empty = {
            (m.namespace, m.job, m.epoch)
            for m in managed
            if all(
                p.name in leaving or p.deleting for p in self._cache.placement_pods(m.job, m.epoch)
            )
        }
        await self._each(self._delete_owner(*placement) for placement in empty)

    async def ungate_pods(self, names: list[str]) -> None:
        """Remove the scheduling gates of Suanpan's pods (gone already or unknown is fine)."""
        managed = [m for m in map(self._cache.managed, names) if m is not None]
        await self._each(self._ungate(m.namespace, m.name) for m in managed)

    async def write_rank_table(self, namespace: str, mount: RankTableMount, content: str) -> None:
        """Merge-patch the rank table's file (the kubelet refreshes mounted copies); gone
        (404: the placement is being torn down) is fine."""
        await self._call(
            self._core.patch_namespaced_config_map,
            mount.config_map,
            namespace,
            {"data": {mount.key: content}},
            accept=(404,),
            _content_type="application/merge-patch+json",
        )

    async def apply_service(self, service: ShardService) -> str:
        """Create the shard's Service, or merge-patch the one of an earlier placement of the
        same job (never another job's: a 409 until that one is gone); its cluster IP."""
        namespace, name = service.namespace, service.name
        if namespace not in self._namespaces:
            await self._ensure_namespace(namespace, service.tenant)
        body = render_shard_service(service)
        core = self._core
        status, obj = await self._call(
            core.create_namespaced_service, namespace, body, accept=(409,)
        )
        if status == 409:
            _, obj = await self._call(core.read_namespaced_service, name, namespace)
            holder = (obj["metadata"].get("labels") or {}).get(ann.JOB_LABEL)
            if holder != service.job:
                raise KubeAPIError(409, f"service {namespace}/{name} is not this shard's")
            patch = {"metadata": {"labels": body["metadata"]["labels"]}, "spec": body["spec"]}
            _, obj = await self._call(
                core.patch_namespaced_service,
                name,
                namespace,
                patch,
                _content_type="application/merge-patch+json",
            )
        return str((obj.get("spec") or {}).get("clusterIP") or "")

    async def telemetry(self) -> list[DeviceTelemetry]:
        """Read every configured exporter and the exporter pods the selectors find now, and
        keep the readings of devices the nodes have."""
        targets = list(self.exporters)
        for found in self.exporter_pods:
            _, pods = await self._call(
                self._core.list_pod_for_all_namespaces, label_selector=found.selector
            )
            targets += found.targets(pods.get("items") or [])
        if not targets:
            return []
        if self._scraper is None:
            self._scraper = aiohttp.ClientSession()
        readings = await scrape(self._scraper, targets, self._profiles)
        return device_readings(readings, self.nodes())

    async def mark_devices(self, node: str, marks: NodeMarks) -> None:
        """Merge-patch the node's telemetry annotation (the extender and this backend's
        inventory read it back from the node); a node gone meanwhile is fine."""
        await self._call(
            self._core.patch_node,
            node,
            {"metadata": {"annotations": {ANNOTATION: encode_marks(marks)}}},
            accept=(404,),
            _content_type="application/merge-patch+json",
        )

    # --- helpers -------------------------------------------------------------------------

    async def pod_logs(
        self, name: str, container: str, *, follow: bool, tail: int | None, limit_bytes: int
    ) -> AsyncGenerator[bytes, None]:
        """The pod's log from the kubelet through the apiserver, streamed as it comes."""
        pod = self._cache.managed(name)
        if pod is None:
            raise LogError(f"no pod {name} in this cluster")
        options: dict[str, Any] = {"follow": follow, "limit_bytes": limit_bytes}
        if container:
            options["container"] = container
        if tail is not None:
            options["tail_lines"] = tail
        try:
            resp: aiohttp.ClientResponse = await self._core.read_namespaced_pod_log(  # type: ignore[assignment]
                name, pod.namespace, _preload_content=False, **options
            )
        except ApiException as exc:
            raise LogError(f"cannot read the log of pod {name}: {exc.status} {exc.reason}") from exc
        try:
            async for chunk in resp.content.iter_any():
                yield chunk
        finally:
            resp.release()

    @property
    def _client(self) -> ApiClient:
        if self._api is None:
            raise RuntimeError("KubernetesBackend used before start()")
        return self._api

    @property
    def _core(self) -> CoreV1Api:
        return CoreV1Api(self._client)

    async def _call(
        self,
        method: Callable[..., Awaitable[Any]],
        *args: Any,
        accept: Collection[int] = (),
        **kwargs: Any,
    ) -> tuple[int, JSON]:
        """Call a generated-client method for its raw JSON, `concurrency` at a time."""
        async with self._limit:
            request = method(
                *args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S, **kwargs
            )
            return await call(self.metrics, method.__name__, request, accept)

    async def _each(self, calls: Iterable[Awaitable[None]]) -> None:
        """Run calls concurrently; once all ended, raise the failure if any (or a summary)."""
        results = await asyncio.gather(*calls, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        unexpected = [e for e in errors if not isinstance(e, KubeAPIError)]
        if unexpected:
            raise unexpected[0]
        if len(errors) == 1:
            raise errors[0]
        if errors:
            first = errors[0]
            assert isinstance(first, KubeAPIError)
            raise KubeAPIError(
                first.status, f"{len(errors)} of {len(results)} failed, e.g. {first}"
            )

    async def _ensure_namespace(self, name: str, tenant: str) -> None:
        """Create a tenant's namespace labelled as Suanpan's; one that exists (an operator
        provisioned the tenant's data in it first) gets the labels added."""
        labels = {ann.MANAGED_LABEL: "true", ann.TENANT_LABEL: tenant}
        body = V1Namespace(metadata=V1ObjectMeta(name=name, labels=labels))
        status, _ = await self._call(self._core.create_namespace, body, accept=(409,))
        if status == 409:
            await self._call(
                self._core.patch_namespace,
                name,
                {"metadata": {"labels": labels}},
                _content_type="application/merge-patch+json",
            )
        self._namespaces.add(name)

    async def _ensure_priority_class(self, name: str, value: int) -> None:
        """Create the PriorityClass unless it exists (its value is then the existing one)."""
        api = SchedulingV1Api(self._client)
        await self._call(
            api.create_priority_class, render_priority_class(name, value), accept=(409,)
        )
        self._priority_classes.add(name)

    async def _owner(self, namespace: str, job: str, epoch: int) -> V1OwnerReference:
        """A reference to the placement's owner ConfigMap, created if missing."""
        core = self._core
        body = render_owner(job, epoch, namespace)
        status, obj = await self._call(
            core.create_namespaced_config_map, namespace, body, accept=(409,)
        )
        if status == 409:
            name = owner_name(job, epoch)
            _, obj = await self._call(core.read_namespaced_config_map, name, namespace)
            if obj["metadata"].get("deletionTimestamp"):
                raise KubeAPIError(409, f"owner {namespace}/{name} is being deleted; retry later")
        return owner_reference(job, epoch, obj["metadata"]["uid"])

    async def _create_placement(
        self, namespace: str, job: str, epoch: int, specs: list[PodSpec]
    ) -> None:
        try:
            owner = await self._owner(namespace, job, epoch)
        except KubeAPIError as exc:
            if exc.status == 404:  # someone deleted the namespace: create it again next time
                self._namespaces.discard(namespace)
            raise
        if specs[0].service:
            service = render_service(specs[0], owner)
            await self._call(
                self._core.create_namespaced_service, namespace, service, accept=(409,)
            )
        mounting = next((s for s in specs if s.rank_table is not None), None)
        if mounting is not None and mounting.rank_table is not None:
            body = render_rank_table(mounting, mounting.rank_table, owner, INITIALIZING)
            await self._call(
                self._core.create_namespaced_config_map, namespace, body, accept=(409,)
            )
        await self._each(self._create_pod(render_pod(spec, owner)) for spec in specs)

    async def _create_pod(self, pod: dict[str, Any]) -> None:
        status, body = await self._call(
            self._core.create_namespaced_pod, pod["metadata"]["namespace"], pod, accept=(409,)
        )
        if status != 409:
            self._cache.upsert_created(body)

    async def _ungate(self, namespace: str, name: str) -> None:
        """Merge-patch the gates away (Kubernetes allows removing gates, never adding them; an
        ungated pod is left as it is). The watch shows the result."""
        await self._call(
            self._core.patch_namespaced_pod,
            name,
            namespace,
            {"spec": {"schedulingGates": None}},
            accept=(404,),
            _content_type="application/merge-patch+json",
        )

    async def _delete_pod(self, namespace: str, name: str, grace_seconds: int) -> None:
        await self._call(
            self._core.delete_namespaced_pod,
            name,
            namespace,
            grace_period_seconds=grace_seconds,
            accept=(404,),
        )

    async def _delete_owner(self, namespace: str, job: str, epoch: int) -> None:
        """Delete an owner whose pods are all being deleted already, and the placement's
        Services. Orphan propagation: the pods keep the grace period they were given, not the
        garbage collector's default."""
        await self._delete_services(namespace, job, epoch)
        await self._call(
            self._core.delete_namespaced_config_map,
            owner_name(job, epoch),
            namespace,
            propagation_policy="Orphan",
            accept=(404,),
        )

    async def _delete_services(self, namespace: str, job: str, epoch: int) -> None:
        """Delete the Services labelled as the placement's, each only as it was listed (a
        shard's Service a later placement of its job took over meanwhile is kept: 409)."""
        selector = ",".join(f"{k}={v}" for k, v in placement_selector(job, epoch).items())
        _, listed = await self._call(
            self._core.list_namespaced_service, namespace, label_selector=selector
        )
        await self._each(
            self._delete_service(namespace, item["metadata"]) for item in listed.get("items") or []
        )

    async def _delete_service(self, namespace: str, meta: JSON) -> None:
        await self._call(
            self._core.delete_namespaced_service,
            meta["name"],
            namespace,
            body={"preconditions": {"resourceVersion": meta["resourceVersion"]}},
            accept=(404, 409),
        )
