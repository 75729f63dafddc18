"""Smoke tests of the local multi-cluster environment (deploy/local).

A pod asking for Ascend chips goes through the real kube-scheduler, which calls a stub
scheduler extender (filter / prioritize / bind) served by this module; kwok then runs
the pod to completion.  The real extender (cluster_agents) plugs in the same way.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from deploy.local import cli
from deploy.local.binaries import BUILD_SCRIPT
from deploy.local.clusters import ClusterState, Environment, down, up
from deploy.local.kube import KubeClient, KubeError, wait_for
from deploy.local.processes import is_running, port_in_use
from tests.e2e.conftest import K8sEnvFactory

pytestmark = pytest.mark.e2e

ASCEND = "huawei.com/Ascend910B3"
REJECT_ANNOTATION = "test.suanpan.io/reject"
REJECT_REASON = "rejected by the stub extender"


@dataclass
class StubExtender:
    """A scheduler extender on 127.0.0.1 in its own thread; URL path /<cluster>/<verb>.

    filter keeps the nodes whose allocatable has every accelerator the pod requests
    (rejects all nodes if the pod has REJECT_ANNOTATION), prioritize scores 0, bind
    creates the Binding through the apiserver.  Calls are recorded.
    """

    clusters: dict[str, ClusterState] = field(default_factory=dict)
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (cluster, verb, pod)
    url: str = ""
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            app = web.Application()
            app.router.add_post("/{cluster}/{verb}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            port = self._runner.addresses[0][1]
            self.url = f"http://127.0.0.1:{port}/{{cluster}}"
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        threading.Thread(target=run, name="stub-extender", daemon=True).start()
        if not ready.wait(10):
            raise RuntimeError("stub extender did not start")

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)

    def calls_for(self, pod: str) -> list[str]:
        return [verb for _, verb, name in self.calls if name == pod]

    async def _handle(self, request: web.Request) -> web.Response:
        cluster, verb = request.match_info["cluster"], request.match_info["verb"]
        args: dict[str, Any] = await request.json()
        cs = self.clusters[cluster]
        if verb == "bind":
            self.calls.append((cluster, verb, args["PodName"]))
            return web.json_response(await self._bind(cs, args))
        pod = args["Pod"]
        self.calls.append((cluster, verb, pod["metadata"]["name"]))
        names: list[str] = args["NodeNames"] or []
        if verb == "prioritize":
            return web.json_response([{"Host": n, "Score": 0} for n in names])
        return web.json_response(await self._filter(cs, pod, names))

    async def _filter(self, cs: ClusterState, pod: dict[str, Any], names: list[str]) -> Any:
        wanted = {
            res
            for c in pod["spec"]["containers"]
            for res in (c.get("resources", {}).get("limits") or {})
            if "/" in res
        }
        async with cs.client() as kc:
            nodes = {n["metadata"]["name"]: n for n in (await kc.get("/api/v1/nodes"))["items"]}
        kept, failed = [], {}
        for name in names:
            alloc = nodes[name]["status"].get("allocatable", {})
            if REJECT_ANNOTATION in pod["metadata"].get("annotations", {}):
                failed[name] = REJECT_REASON
            elif wanted <= alloc.keys():
                kept.append(name)
            else:
                failed[name] = f"no {', '.join(sorted(wanted - alloc.keys()))}"
        return {"NodeNames": kept, "FailedNodes": failed, "Error": ""}

    async def _bind(self, cs: ClusterState, args: dict[str, Any]) -> dict[str, str]:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": args["PodName"], "uid": args["PodUID"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": args["Node"]},
        }
        path = f"/api/v1/namespaces/{args['PodNamespace']}/pods/{args['PodName']}/binding"
        try:
            async with cs.client() as kc:
                await kc.post(path, binding)
        except KubeError as exc:
            return {"Error": str(exc)}
        return {"Error": ""}


@pytest.fixture(scope="module")
def extender() -> Iterator[StubExtender]:
    stub = StubExtender()
    stub.start()
    yield stub
    stub.stop()


@pytest.fixture(scope="module")
def env(k8s_env_factory: K8sEnvFactory, extender: StubExtender) -> Environment:
    environment = k8s_env_factory(2, extender.url)
    extender.clusters.update({c.name: c for c in environment.clusters})
    return environment


def pod_manifest(
    name: str,
    annotations: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "schedulerName": "suanpan-scheduler",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/suanpan/train:1",
                    "resources": {"limits": limits or {}, "requests": limits or {}},
                }
            ],
        },
    }


async def wait_pod(
    kc: KubeClient, name: str, phases: set[str], timeout_s: float = 30
) -> tuple[dict[str, Any], list[str]]:
    """Poll the pod until its phase is in `phases`; return it and the phases seen."""
    seen: list[str] = []
    pod: dict[str, Any] = {}

    async def reached() -> bool:
        nonlocal pod
        pod = await kc.get(f"/api/v1/namespaces/default/pods/{name}")
        phase = pod["status"].get("phase", "")
        if not seen or seen[-1] != phase:
            seen.append(phase)
        return phase in phases

    await wait_for(f"pod {name} in {phases}", reached, timeout_s, 0.05, lambda: f"seen {seen}")
    return pod, seen


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def test_ascend_pod_goes_through_extender_runs_and_succeeds(
    env: Environment, extender: StubExtender
) -> None:
    cs = env.clusters[0]
    name = unique("ascend")
    async with cs.client() as kc:
        nodes = (await kc.get("/api/v1/nodes"))["items"]
        fitting = [
            n["metadata"]["name"]
            for n in nodes
            if int(n["status"]["allocatable"].get(ASCEND, "0")) >= 8
        ]
        assert len(fitting) == 1, fitting
        await kc.post(
            "/api/v1/namespaces/default/pods",
            pod_manifest(name, {"suanpan.io/run-seconds": "2"}, {ASCEND: "8"}),
        )
        pod, seen = await wait_pod(kc, name, {"Succeeded", "Failed"})

    assert pod["spec"]["nodeName"] == fitting[0]
    assert seen[-2:] == ["Running", "Succeeded"], seen
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert extender.calls_for(name) == ["filter", "bind"]  # one candidate: no prioritize
    assert all(c == cs.name for c, _, p in extender.calls if p == name)


async def test_scheduler_log_shows_extender_verdict(
    env: Environment, extender: StubExtender
) -> None:
    cs = env.clusters[1]
    name = unique("rejected")
    log = Path(next(p.log for p in cs.processes if p.name.endswith("/kube-scheduler")))
    async with cs.client() as kc:
        await kc.post(
            "/api/v1/namespaces/default/pods",
            pod_manifest(name, {REJECT_ANNOTATION: "yes"}, {ASCEND: "8"}),
        )

        async def logged() -> bool:
            text = await asyncio.to_thread(log.read_text)
            return name in text and REJECT_REASON in text

        await wait_for("scheduler log naming the extender's verdict", logged, 20)
        pod = await kc.get(f"/api/v1/namespaces/default/pods/{name}")
        assert pod["status"]["phase"] == "Pending"
        assert "nodeName" not in pod["spec"]
        events = await kc.get(
            f"/api/v1/namespaces/default/events?fieldSelector=involvedObject.name={name}"
        )
        assert any(REJECT_REASON in e.get("message", "") for e in events["items"])
        await kc.delete(f"/api/v1/namespaces/default/pods/{name}")
    assert "filter" in extender.calls_for(name)
    assert "bind" not in extender.calls_for(name)


async def test_fail_reason_annotation_fails_pod(env: Environment, extender: StubExtender) -> None:
    cs = env.clusters[0]
    name = unique("oom")
    async with cs.client() as kc:
        await kc.post(
            "/api/v1/namespaces/default/pods",
            pod_manifest(name, {"suanpan.io/fail-reason": "OOMKilled"}),
        )
        pod, seen = await wait_pod(kc, name, {"Succeeded", "Failed"})
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert pod["status"]["phase"] == "Failed", seen
    assert pod["status"]["reason"] == "OOMKilled"
    assert (term["reason"], term["exitCode"]) == ("OOMKilled", 137)
    assert extender.calls_for(name) == []  # no managed resource requested


async def test_pod_without_run_seconds_runs_until_deleted(env: Environment) -> None:
    cs = env.clusters[1]
    name = unique("forever")
    path = f"/api/v1/namespaces/default/pods/{name}"
    async with cs.client() as kc:
        await kc.post("/api/v1/namespaces/default/pods", pod_manifest(name))
        await wait_pod(kc, name, {"Running"})
        await asyncio.sleep(1.5)
        assert (await kc.get(path))["status"]["phase"] == "Running"
        await kc.delete(path)

        async def gone() -> bool:
            try:
                await kc.get(path)
            except KubeError as exc:
                return exc.status == 404
            return False

        await wait_for(f"pod {name} deleted", gone, 15)


async def test_clusters_are_isolated(env: Environment) -> None:
    a, b = env.clusters[:2]
    name = unique("isolated")
    async with a.client() as ka, b.client() as kb:
        await ka.post("/api/v1/namespaces/default/pods", pod_manifest(name))
        names_b = {p["metadata"]["name"] for p in (await kb.get("/api/v1/pods"))["items"]}
        nodes_b = {n["metadata"]["name"] for n in (await kb.get("/api/v1/nodes"))["items"]}
        await ka.delete(f"/api/v1/namespaces/default/pods/{name}")
    assert name not in names_b
    assert nodes_b == set(b.nodes)
    assert a.etcd_prefix != b.etcd_prefix


def test_kubeconfig_and_status_cli(env: Environment, capsys: pytest.CaptureFixture[str]) -> None:
    cs = env.clusters[0]
    out = subprocess.run(
        [str(env.bin_dir / "kubectl"), f"--kubeconfig={cs.kubeconfig}", "get", "nodes", "-o=name"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"], "KUBECACHEDIR": str(env.workdir / "home" / "kubecache")},
    ).stdout.split()
    assert sorted(out) == sorted(f"node/{n}" for n in cs.nodes)
    assert cli.main(["clusters", "status", "--workdir", str(env.workdir)]) == 0
    assert f"{cs.name}: healthy" in capsys.readouterr().out


def test_up_down_leaves_nothing_behind(k8s_bin_dir: Path) -> None:
    t0 = time.monotonic()
    one = asyncio.run(up(1, bin_dir=k8s_bin_dir))
    procs, ports, workdir = one.processes(), one.ports(), one.workdir
    assert all(is_running(p) for p in procs)
    assert len(procs) == 5  # etcd + apiserver, kcm, scheduler, kwok
    assert time.monotonic() - t0 < 60
    notes = asyncio.run(down(workdir))
    assert notes == []
    assert not any(is_running(p) for p in procs)
    assert not any(port_in_use(p) for p in ports)
    assert not workdir.exists()


def test_warm_build_is_a_no_op(k8s_bin_dir: Path) -> None:
    t0 = time.monotonic()
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=True
    ).stdout
    assert Path(out.strip()) == k8s_bin_dir
    assert time.monotonic() - t0 < 1.0
