"""Bring N local Kubernetes clusters up and down: one embedded etcd (a key prefix per
cluster) and, per cluster, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok faking the profile's nodes.  Everything listens on 127.0.0.1 only.

State lives in `<workdir>/clusters.json`, written as processes start, so `down` (even
from another process) can stop a half-started environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import string
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from cluster_agents.extender.config import managed_resources
from deploy.local import pki
from deploy.local.binaries import ensure_binaries
from deploy.local.kube import KubeClient, KubeError, wait_for
from deploy.local.processes import (
    ProcessRecord,
    free_ports,
    is_running,
    port_in_use,
    spawn,
    stop,
)
from deploy.local.profile import DEFAULT_PROFILE, ClusterProfile, Profile, load_profile
from federation.catalog import load_catalog

STATE_FILE = "clusters.json"
CONFIG_DIR = Path(__file__).resolve().parent / "config"
SCHEDULER_TEMPLATE = CONFIG_DIR / "kube-scheduler.yaml"
KWOK_STAGES = CONFIG_DIR / "kwok-stages.yaml"
SCHEDULER_NAME = "suanpan-scheduler"
# Stop order: node fakes and controllers first, apiservers before etcd (an apiserver
# whose etcd is gone retries for a minute before it exits).
STOP_ORDER = ("kwok", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "etcd")
_OWNED_PATHS = ("pki", "etcd", "clusters", "home", "tmp", STATE_FILE)


class ClustersError(RuntimeError):
    """The environment could not be brought up (message includes log tails)."""


@dataclass
class ClusterState:
    """One running cluster, as recorded in clusters.json."""

    name: str
    apiserver_url: str
    kubeconfig: str
    ca_file: str
    token: str
    etcd_prefix: str
    extender_url: str | None
    ports: dict[str, int]
    nodes: list[str]
    processes: list[ProcessRecord] = field(default_factory=list)
    index: int = 0  # its place in the environment: its loopback pod addresses

    def loopback_pod_cidr(self, block: int) -> str:
        """A /24 of loopback addresses (`block` 0..255 of this cluster's 127.<100 + index>/16)
        for the pods of a kwok node created with it as `spec.podCIDR`: kwok gives pods the
        addresses of their node's podCIDR, so a test can serve on a pod's address (a pod's
        metrics, say). The cluster's default pod range (kwok's `--cidr`) stays 10.244.0.0/16:
        EndpointSlices refuse loopback addresses, so the pods of such a node are in none."""
        if not 0 <= block <= 255:
            raise ValueError(f"block {block} is not 0..255")
        return f"127.{100 + self.index}.{block}.0/24"

    @property
    def pids(self) -> dict[str, int]:
        """Component name -> pid."""
        return {p.name.rsplit("/", 1)[-1]: p.pid for p in self.processes}

    def url(self, component: str) -> str:
        """Base URL of a component's server (kube-apiserver, kube-scheduler, ...)."""
        scheme = "http" if component == "kwok" else "https"
        return f"{scheme}://127.0.0.1:{self.ports[component]}"

    @property
    def pod_log(self) -> Path:
        """The file kwok serves as every pod's container log (CRI log format, one
        `<RFC 3339 time> stdout F <text>` per line; appended lines stream to `--follow`)."""
        return Path(self.kubeconfig).parent / "clusters" / self.name / "pods.log"

    def client(self) -> KubeClient:
        """An admin client for this cluster's apiserver."""
        return KubeClient(self.apiserver_url, self.token, self.ca_file)

    def to_json(self) -> dict[str, Any]:
        """JSON form (clusters.json entry)."""
        return {
            "name": self.name,
            "apiserver_url": self.apiserver_url,
            "kubeconfig": self.kubeconfig,
            "ca_file": self.ca_file,
            "token": self.token,
            "etcd_prefix": self.etcd_prefix,
            "extender_url": self.extender_url,
            "ports": self.ports,
            "pids": self.pids,
            "nodes": self.nodes,
            "processes": [p.to_json() for p in self.processes],
            "index": self.index,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ClusterState:
        """Inverse of `to_json`."""
        return cls(
            name=d["name"],
            apiserver_url=d["apiserver_url"],
            kubeconfig=d["kubeconfig"],
            ca_file=d["ca_file"],
            token=d["token"],
            etcd_prefix=d["etcd_prefix"],
            extender_url=d["extender_url"],
            ports={k: int(v) for k, v in d["ports"].items()},
            nodes=list(d["nodes"]),
            processes=[ProcessRecord.from_json(p) for p in d["processes"]],
            index=int(d.get("index", 0)),
        )


@dataclass
class Environment:
    """All clusters of one run plus the shared etcd."""

    workdir: Path
    owns_workdir: bool
    bin_dir: Path
    profile: str
    etcd_url: str
    etcd_ports: dict[str, int]
    etcd: ProcessRecord | None = None
    clusters: list[ClusterState] = field(default_factory=list)
    ready_seconds: float | None = None

    @property
    def state_file(self) -> Path:
        """Path of clusters.json."""
        return self.workdir / STATE_FILE

    def processes(self) -> list[ProcessRecord]:
        """Every recorded process."""
        procs = [p for c in self.clusters for p in c.processes]
        return [*procs, self.etcd] if self.etcd else procs

    def ports(self) -> list[int]:
        """Every port the environment listens on."""
        return [*self.etcd_ports.values(), *(p for c in self.clusters for p in c.ports.values())]

    def save(self) -> None:
        """Write clusters.json atomically."""
        data = {
            "workdir": str(self.workdir),
            "owns_workdir": self.owns_workdir,
            "bin_dir": str(self.bin_dir),
            "profile": self.profile,
            "etcd": {
                "url": self.etcd_url,
                "ports": self.etcd_ports,
                "process": self.etcd.to_json() if self.etcd else None,
            },
            "ready_seconds": self.ready_seconds,
            "clusters": [c.to_json() for c in self.clusters],
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.state_file)

    @classmethod
    def load(cls, workdir: Path) -> Environment | None:
        """Read clusters.json from workdir; None if there is none."""
        path = workdir / STATE_FILE
        if not path.is_file():
            return None
        d = json.loads(path.read_text())
        etcd = d["etcd"]
        return cls(
            workdir=Path(d["workdir"]),
            owns_workdir=bool(d["owns_workdir"]),
            bin_dir=Path(d["bin_dir"]),
            profile=d["profile"],
            etcd_url=etcd["url"],
            etcd_ports={k: int(v) for k, v in etcd["ports"].items()},
            etcd=ProcessRecord.from_json(etcd["process"]) if etcd["process"] else None,
            clusters=[ClusterState.from_json(c) for c in d["clusters"]],
            ready_seconds=d.get("ready_seconds"),
        )

    def cluster(self, name: str) -> ClusterState:
        """The cluster called `name`."""
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(name)


# ---------------------------------------------------------------------------------- helpers


def _tail(path: str | Path, lines: int = 25) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _child_env(workdir: Path) -> dict[str, str]:
    """A minimal, hermetic environment: nothing from the caller's HOME or proxies."""
    home = workdir / "home"
    for d in (home / ".config", home / "kubecache", workdir / "tmp"):
        d.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "KUBECACHEDIR": str(home / "kubecache"),
        "GOTELEMETRY": "off",
        "TMPDIR": str(workdir / "tmp"),
        "LANG": "C.UTF-8",
    }


def _cluster_logs(path: Path) -> dict[str, Any]:
    """kwok's ClusterLogs: every pod's every container logs `path`, followed when asked."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "suanpan-pod-logs"},
        "spec": {"logs": [{"logsFile": str(path), "follow": True}]},
    }


def _kubeconfig(name: str, server: str, ca_file: Path, token: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": server, "certificate-authority": str(ca_file)}}
            ],
            "users": [{"name": "suanpan-admin", "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": "suanpan-admin"}}],
            "current-context": name,
        },
        sort_keys=False,
    )


def render_scheduler_config(kubeconfig: Path, extender_url: str | None) -> dict[str, Any]:
    """Render config/kube-scheduler.yaml; no `extenders` when extender_url is None.

    `managedResources` are production's (`cluster_agents.extender.config.managed_resources`):
    every catalog resource, device counts left to kube-scheduler's NodeResourcesFit, the
    sharing amounts (`nvidia.com/gpumem`, ...), which no node advertises, ignored by it."""
    text = string.Template(SCHEDULER_TEMPLATE.read_text()).substitute(
        kubeconfig=json.dumps(str(kubeconfig)),
        extender_url=json.dumps(extender_url or ""),
        managed_resources=json.dumps(managed_resources(load_catalog())),
    )
    cfg: dict[str, Any] = yaml.safe_load(text)
    if not extender_url:
        del cfg["extenders"]
    return cfg


def extender_url_for(extender_url: str | Mapping[str, str] | None, cluster: str) -> str | None:
    """Resolve the extender URL of one cluster.

    A string may contain `{cluster}` (replaced by the cluster name); a mapping gives
    per-cluster URLs, and clusters missing from it get no extender.
    """
    if extender_url is None:
        return None
    if isinstance(extender_url, str):
        return extender_url.replace("{cluster}", cluster)
    return extender_url.get(cluster)


def _prepare_workdir(workdir: Path | None) -> tuple[Path, bool]:
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix="suanpan-k8s-")), True
    workdir = workdir.resolve()
    old = Environment.load(workdir)
    if old is not None:
        if any(is_running(p) for p in old.processes()):
            raise ClustersError(f"clusters already up in {workdir}; run `down` first")
        _remove_owned(workdir, owns=False)
    if workdir.exists():
        return workdir, old.owns_workdir if old else False
    workdir.mkdir(parents=True)
    return workdir, True


def _remove_owned(workdir: Path, owns: bool) -> None:
    if owns:
        shutil.rmtree(workdir, ignore_errors=True)
        return
    for name in _OWNED_PATHS:
        p = workdir / name
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    for kc in workdir.glob("*.kubeconfig"):
        kc.unlink()


async def _wait_up(
    what: str,
    proc: ProcessRecord,
    check: Callable[[], Awaitable[bool]],
    timeout_s: float,
) -> None:
    """Wait for `check`, failing fast (with the log tail) if `proc` dies."""

    async def alive_and_ok() -> bool:
        if not is_running(proc):
            raise ClustersError(f"{proc.name} exited while waiting for {what}:\n{_tail(proc.log)}")
        return await check()

    try:
        await wait_for(what, alive_and_ok, timeout_s)
    except TimeoutError as exc:
        raise ClustersError(f"{exc}\n--- {proc.log}:\n{_tail(proc.log)}") from None


# ------------------------------------------------------------------------------------- up


class _Starter:
    """Starts the components of one environment (used by `up`)."""

    def __init__(
        self,
        env: Environment,
        profile: Profile,
        extender_url: str | Mapping[str, str] | None,
        timeout_s: float,
        verbosity: int,
    ) -> None:
        self.env = env
        self.profile = profile
        self.extender_url = extender_url
        self.timeout_s = timeout_s
        self.verbosity = verbosity
        self.child_env = _child_env(env.workdir)
        self.bin = env.bin_dir

    def _spawn(self, name: str, argv: list[str], log: Path) -> ProcessRecord:
        return spawn(name, argv, log, self.child_env, self.env.workdir)

    async def start_etcd(self) -> None:
        d = self.env.workdir / "etcd"
        d.mkdir(parents=True, exist_ok=True)
        ports = self.env.etcd_ports
        self.env.etcd = self._spawn(
            "etcd",
            [
                str(self.bin / "etcd"),
                f"--data-dir={d / 'data'}",
                f"--listen-client=127.0.0.1:{ports['client']}",
                f"--listen-peer=127.0.0.1:{ports['peer']}",
            ],
            d / "etcd.log",
        )
        self.env.save()
        async with aiohttp.ClientSession() as session:

            async def healthy() -> bool:
                try:
                    async with session.get(f"{self.env.etcd_url}/health") as r:
                        return r.status == 200 and '"health":"true"' in await r.text()
                except aiohttp.ClientError:
                    return False

            await _wait_up("etcd /health", self.env.etcd, healthy, self.timeout_s)

    def new_cluster(self, cp: ClusterProfile, ports: list[int], pki_: pki.ServingPKI) -> None:
        cdir = self.env.workdir / "clusters" / cp.name
        cdir.mkdir(parents=True)
        ext = extender_url_for(self.extender_url, cp.name)
        token = pki.new_token()
        pki.write_token_file(cdir / "tokens.csv", token)
        pki.write_service_account_keys(cdir)
        names = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
        cs = ClusterState(
            name=cp.name,
            apiserver_url=f"https://127.0.0.1:{ports[0]}",
            kubeconfig=str(self.env.workdir / f"{cp.name}.kubeconfig"),
            ca_file=str(pki_.ca_cert),
            token=token,
            etcd_prefix=f"/suanpan/{cp.name}",
            extender_url=ext,
            ports=dict(zip(names, ports, strict=True)),
            nodes=[n.name for n in cp.nodes],
            index=len(self.env.clusters),
        )
        cs.pod_log.touch()
        (cdir / "kwok-logs.yaml").write_text(yaml.safe_dump(_cluster_logs(cs.pod_log)))
        kc = Path(cs.kubeconfig)
        kc.write_text(_kubeconfig(cp.name, cs.apiserver_url, pki_.ca_cert, token))
        kc.chmod(0o600)
        sched = render_scheduler_config(kc, ext)
        (cdir / "kube-scheduler.yaml").write_text(yaml.safe_dump(sched, sort_keys=False))
        self.env.clusters.append(cs)

    def _cdir(self, cs: ClusterState) -> Path:
        return self.env.workdir / "clusters" / cs.name

    def _serving(self, pki_: pki.ServingPKI) -> list[str]:
        return [
            f"--tls-cert-file={pki_.serving_cert}",
            f"--tls-private-key-file={pki_.serving_key}",
        ]

    async def start_apiserver(self, cs: ClusterState, pki_: pki.ServingPKI) -> None:
        d = self._cdir(cs)
        proc = self._spawn(
            f"{cs.name}/kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                f"--etcd-servers={self.env.etcd_url}",
                f"--etcd-prefix={cs.etcd_prefix}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={cs.ports['kube-apiserver']}",
                f"--cert-dir={d / 'certs'}",
                *self._serving(pki_),
                f"--client-ca-file={pki_.ca_cert}",
                f"--token-auth-file={d / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",  # as kubeadm sets it: device DaemonSets need it
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={d / 'sa.pub'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--endpoint-reconciler-type=none",
                "--enable-priority-and-fairness=false",
                "--kubelet-preferred-address-types=InternalIP",  # kwok's server, for logs
                "--profiling=false",
                f"--requestheader-client-ca-file={pki_.ca_cert}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--v={self.verbosity}",
            ],
            d / "kube-apiserver.log",
        )
        cs.processes.append(proc)
        self.env.save()
        async with cs.client() as kc:

            async def ready() -> bool:
                status, _ = await kc.probe(f"{cs.apiserver_url}/readyz")
                return status == 200

            await _wait_up(f"{cs.name} kube-apiserver /readyz", proc, ready, self.timeout_s)

    async def start_rest(self, cs: ClusterState, pki_: pki.ServingPKI, cp: ClusterProfile) -> None:
        d, kc = self._cdir(cs), cs.kubeconfig
        delegated = [f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}"]
        kcm = self._spawn(
            f"{cs.name}/kube-controller-manager",
            [
                str(self.bin / "kube-controller-manager"),
                f"--kubeconfig={kc}",
                *delegated,
                "--bind-address=127.0.0.1",
                f"--secure-port={cs.ports['kube-controller-manager']}",
                *self._serving(pki_),
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={d / 'sa.key'}",
                f"--root-ca-file={pki_.ca_cert}",
                f"--cluster-signing-cert-file={pki_.ca_cert}",
                f"--cluster-signing-key-file={pki_.ca_key}",
                f"--flex-volume-plugin-dir={d / 'flex'}",
                f"--cluster-name={cs.name}",
                "--profiling=false",
                f"--v={self.verbosity}",
            ],
            d / "kube-controller-manager.log",
        )
        sched = self._spawn(
            f"{cs.name}/kube-scheduler",
            [
                str(self.bin / "kube-scheduler"),
                f"--config={d / 'kube-scheduler.yaml'}",
                *delegated,
                "--bind-address=127.0.0.1",
                f"--secure-port={cs.ports['kube-scheduler']}",
                *self._serving(pki_),
                "--profiling=false",
                f"--v={max(self.verbosity, 2)}",
            ],
            d / "kube-scheduler.log",
        )
        kwok = self._spawn(
            f"{cs.name}/kwok",
            [
                str(self.bin / "kwok"),
                f"--kubeconfig={kc}",
                f"--config={KWOK_STAGES}",
                f"--config={d / 'kwok-logs.yaml'}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--manage-nodes-with-label-selector=",
                "--manage-single-node=",
                "--cidr=10.244.0.0/16",
                "--node-ip=127.0.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{cs.ports['kwok']}",
                f"--node-port={cs.ports['kwok']}",  # nodes' kubelet endpoint: logs
            ],
            d / "kwok.log",
        )
        cs.processes += [kcm, sched, kwok]
        self.env.save()

        async with cs.client() as client:
            for node in cp.nodes:
                try:
                    await client.post("/api/v1/nodes", node.manifest(cs.name))
                except KubeError as exc:
                    if exc.status != 409:
                        raise

            def probe(url: str) -> Callable[[], Awaitable[bool]]:
                async def ok() -> bool:
                    return (await client.probe(url))[0] == 200

                return ok

            await asyncio.gather(
                _wait_up(
                    f"{cs.name} kube-scheduler /readyz",
                    sched,
                    probe(f"{cs.url('kube-scheduler')}/readyz"),
                    self.timeout_s,
                ),
                _wait_up(
                    f"{cs.name} kube-controller-manager /healthz",
                    kcm,
                    probe(f"{cs.url('kube-controller-manager')}/healthz"),
                    self.timeout_s,
                ),
                _wait_up(
                    f"{cs.name} kwok /healthz",
                    kwok,
                    probe(f"{cs.url('kwok')}/healthz"),
                    self.timeout_s,
                ),
            )

            async def nodes_ready() -> bool:
                return not await unready_nodes(client, cs.nodes)

            await _wait_up(f"{cs.name} nodes Ready and untainted", kcm, nodes_ready, self.timeout_s)

            async def default_sa() -> bool:
                try:
                    await client.get("/api/v1/namespaces/default/serviceaccounts/default")
                except KubeError:
                    return False
                return True

            await _wait_up(f"{cs.name} default ServiceAccount", kcm, default_sa, self.timeout_s)


async def unready_nodes(client: KubeClient, expected: Iterable[str]) -> list[str]:
    """Names of expected nodes that are missing, not Ready, or tainted."""
    items = {n["metadata"]["name"]: n for n in (await client.get("/api/v1/nodes"))["items"]}
    bad: list[str] = []
    for name in expected:
        node = items.get(name)
        conds = {
            c["type"]: c["status"] for c in (node or {}).get("status", {}).get("conditions", [])
        }
        if node is None or conds.get("Ready") != "True" or node["spec"].get("taints"):
            bad.append(name)
    return bad


async def up(
    clusters: int = 2,
    profile_path: Path = DEFAULT_PROFILE,
    workdir: Path | None = None,
    extender_url: str | Mapping[str, str] | None = None,
    *,
    bin_dir: Path,
    timeout_s: float = 120.0,
    verbosity: int = 1,
    keep_on_failure: bool = False,
) -> Environment:
    """Start `clusters` clusters from the profile and wait until all are healthy.

    `extender_url`: see `extender_url_for`; None = schedulers without extender.
    `bin_dir` must hold the binaries (see binaries.ensure_binaries, which builds
    them; call it before the event loop, it may take minutes).  On failure
    everything started is stopped; the workdir (with logs) is removed unless
    `keep_on_failure`.
    """
    t0 = time.monotonic()
    profile = load_profile(profile_path)
    if not 1 <= clusters <= len(profile.clusters):
        raise ClustersError(
            f"--clusters must be 1..{len(profile.clusters)} for profile {profile_path}"
        )
    bins = ensure_binaries(bin_dir)
    wd, owns = _prepare_workdir(workdir)
    ports = free_ports(2 + 4 * clusters)
    env = Environment(
        workdir=wd,
        owns_workdir=owns,
        bin_dir=bins,
        profile=str(profile_path),
        etcd_url=f"http://127.0.0.1:{ports[0]}",
        etcd_ports={"client": ports[0], "peer": ports[1]},
    )
    starter = _Starter(env, profile, extender_url, timeout_s, verbosity)
    try:
        pki_ = pki.write_serving_pki(wd / "pki")
        chosen = profile.clusters[:clusters]
        for i, cp in enumerate(chosen):
            starter.new_cluster(cp, ports[2 + 4 * i : 6 + 4 * i], pki_)
        env.save()
        await starter.start_etcd()
        await asyncio.gather(*(starter.start_apiserver(cs, pki_) for cs in env.clusters))
        await asyncio.gather(
            *(starter.start_rest(cs, pki_, cp) for cs, cp in zip(env.clusters, chosen, strict=True))
        )
        env.ready_seconds = round(time.monotonic() - t0, 2)
        env.save()
    except BaseException as exc:
        await _stop_processes(env)
        if not keep_on_failure:
            _remove_owned(wd, env.owns_workdir)
        if isinstance(exc, ClustersError | KubeError | OSError):
            where = f" (logs kept in {wd})" if keep_on_failure else ""
            raise ClustersError(f"clusters up failed{where}: {exc}") from exc
        raise
    return env


# ------------------------------------------------------------------------------ down/status


async def _stop_processes(env: Environment) -> list[str]:
    killed: list[str] = []
    procs = env.processes()
    for role in STOP_ORDER:
        tier = [p for p in procs if p.name.rsplit("/", 1)[-1] == role]
        if tier:
            killed += await stop(tier)
    return killed


async def down(workdir: Path) -> list[str]:
    """Stop everything recorded in workdir/clusters.json and remove what `up` created.

    Returns human-readable notes (processes that needed SIGKILL, ports still bound).
    """
    env = Environment.load(workdir)
    if env is None:
        return [f"no {STATE_FILE} in {workdir}: nothing to stop"]
    notes = [f"{name} ignored SIGTERM and was killed" for name in await _stop_processes(env)]
    deadline = time.monotonic() + 5
    busy = [p for p in env.ports() if port_in_use(p)]
    while busy and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        busy = [p for p in busy if port_in_use(p)]
    notes += [f"port {p} still in use after down" for p in busy]
    _remove_owned(env.workdir, env.owns_workdir)
    return notes


@dataclass
class ClusterHealth:
    """Health of one cluster's components."""

    name: str
    components: dict[str, str]
    unready_nodes: list[str]

    @property
    def healthy(self) -> bool:
        """All components ok and every node Ready."""
        return all(v == "ok" for v in self.components.values()) and not self.unready_nodes


async def cluster_health(env: Environment, cs: ClusterState) -> ClusterHealth:
    """Probe each component of one cluster."""
    comps: dict[str, str] = {}
    probes = {
        "kube-apiserver": "/readyz",
        "kube-scheduler": "/readyz",
        "kube-controller-manager": "/healthz",
        "kwok": "/healthz",
    }
    etcd_ok = env.etcd is not None and is_running(env.etcd)
    comps["etcd"] = "ok" if etcd_ok else "not running"
    unready: list[str] = list(cs.nodes)
    async with cs.client() as client:
        procs = {p.name.rsplit("/", 1)[-1]: p for p in cs.processes}
        for comp, path in probes.items():
            proc = procs.get(comp)
            if proc is None or not is_running(proc):
                comps[comp] = "not running"
                continue
            status, body = await client.probe(cs.url(comp) + path)
            comps[comp] = "ok" if status == 200 else f"HTTP {status}: {body.strip()[:80]}"
        if comps["kube-apiserver"] == "ok":
            unready = await unready_nodes(client, cs.nodes)
    return ClusterHealth(cs.name, comps, unready)


async def status(workdir: Path) -> list[ClusterHealth] | None:
    """Health of every cluster in workdir; None when nothing was brought up there."""
    env = Environment.load(workdir)
    if env is None:
        return None
    return list(await asyncio.gather(*(cluster_health(env, cs) for cs in env.clusters)))


# ------------------------------------------------------------------------------ faults


async def stop_component(cs: ClusterState, component: str) -> None:
    """Stop one component of a cluster (e.g. its kube-apiserver), as an outage would."""
    record = next(p for p in cs.processes if p.name == f"{cs.name}/{component}")
    await stop([record])


async def start_component(env: Environment, cs: ClusterState, component: str) -> None:
    """Start a stopped component again with the arguments it had; return once it listens."""
    old = next(p for p in cs.processes if p.name == f"{cs.name}/{component}")
    new = spawn(old.name, old.argv, Path(old.log), _child_env(env.workdir), env.workdir)
    cs.processes[cs.processes.index(old)] = new
    env.save()
    port = cs.ports[component]
    deadline = time.monotonic() + 60
    while not port_in_use(port):
        if time.monotonic() > deadline or not is_running(new):
            raise ClustersError(f"{old.name} did not start again; see {old.log}")
        await asyncio.sleep(0.1)
