"""`make demo`: the whole flow on one machine, every part real but the clusters' hardware.

An embedded PostgreSQL 16, the hub (REST API + scheduling loop) on a loopback port, three
simulated member clusters of mixed vendors (NVIDIA, Huawei Ascend, Cambricon, Hygon,
Kunlunxin, Moore Threads, MetaX), each driven by the real agent. Two tenants submit work over
REST; the report shows placement across vendors, a heterogeneous job, an urgent job
preempting (its victim requeued and re-run), `explain` for a waiting job, utilization (allocated
and live, as the agents read the devices' exporters; a device failing under a share), and a
Kubeflow PyTorchJob written for NVIDIA, imported as it is, running on Ascend with its ranks,
hostnames and vendor runtime variables, the tenant's namespace, its HCCL rank table and a
replica's logs, and a replica killed for memory: its exit code and reason, run again in place,
then the job Failed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from api.cli import REPLICA_HEADER, replica_rows, top_rows
from api.cli_output import table
from cluster_agents.backends.simulated import Reading, SimulatedCluster
from deploy.browser import console_screenshots
from deploy.fleet import Fleet, free_port, local_fleet
from deploy.load_ramp import Load
from deploy.local.kube import wait_for

ADMIN = "sp_demo_admin"
SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
CLUSTERS = (
    ("beijing-a", "dc-beijing", "beijing"),
    ("shanghai-a", "dc-shanghai", "shanghai"),
    ("shenzhen-a", "dc-shenzhen", "shenzhen"),
)


def section(title: str) -> None:
    """Print a report heading."""
    print(f"\n== {title} " + "=" * max(0, 74 - len(title)))


def task(
    name: str,
    flavors: list[str],
    count: int,
    *,
    replicas: int = 1,
    run_s: int = 60,
    fraction: float | None = None,
    images: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A task asking for `count` devices of any of `flavors`, running `run_s` simulated seconds."""
    accel: dict[str, Any] = {"count": count, "anyOf": [{"flavor": f} for f in flavors]}
    if fraction is not None:
        accel["fraction"] = fraction
    return {
        "name": name,
        "replicas": replicas,
        "images": images
        or {
            "nvidia": "pytorch:2.4",
            "huawei": "mindspore:2.3",
            "cambricon": "torch-mlu:2.1",
            "hygon": "dtk-torch:24.04",
            "kunlunxin": "xpytorch:2.0",
            "mthreads": "torch-musa:1.3",
            "metax": "maca-torch:2.2",
        },
        "annotations": {"suanpan.io/run-seconds": str(run_s)},
        "resources": {"cpu": "8", "memory": "64Gi", "accelerators": accel},
    }


def job(name: str, tenant: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A job manifest."""
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": name, "tenant": tenant},
        "spec": {"queue": "training", "tasks": tasks, **spec},
    }


async def until_state(
    fleet: Fleet, job_id: str, states: set[str], seconds: float = 60
) -> dict[str, Any]:
    """Poll a job until it reaches one of `states` (bounded)."""
    deadline = time.monotonic() + seconds
    while True:
        current: dict[str, Any] = await fleet.call("GET", f"/v1/jobs/{job_id}")
        if current["state"] in states or time.monotonic() > deadline:
            return current
        await asyncio.sleep(0.2)


async def finished(fleet: Fleet, ids: dict[str, str], *names: str) -> None:
    """Wait for the named jobs of the first wave to end (what the next step needs free)."""
    for name in names:
        done = await until_state(fleet, ids[name], {"Succeeded", "Failed"}, 180)
        assert done["state"] == "Succeeded", (name, done["state"], done["reason"])


async def inventory(fleet: Fleet) -> None:
    section("inventory the agents discovered (per cluster and vendor)")
    clusters = (await fleet.call("GET", "/v1/clusters"))["items"]
    rows = []
    for c in clusters:
        by_vendor: dict[str, list[str]] = defaultdict(list)
        for f in c["flavors"]:
            by_vendor[f["vendor"]].append(f"{f['flavor'].split('/')[1]}×{f['total']}")
        rows += [
            [c["name"], c["region"], c["state"], c["nodes"], vendor, ", ".join(models)]
            for vendor, models in sorted(by_vendor.items())
        ]
    print(table(rows, ["CLUSTER", "REGION", "STATE", "NODES", "VENDOR", "DEVICES"]))


async def utilization(fleet: Fleet, title: str) -> None:
    section(title)
    clusters = (await fleet.call("GET", "/v1/clusters"))["items"]
    rows = [
        [
            c["name"],
            f["vendor"],
            f["flavor"].split("/")[1],
            f["total"],
            f"{f['allocatedMilli'] / 1000:g}",
            f"{100 * f['allocatedMilli'] / 1000 / max(1, f['healthy']):.0f}%",
            "-" if f["utilization"] is None else f"{f['utilization']:.0f}%",
        ]
        for c in clusters
        for f in c["flavors"]
    ]
    header = ["CLUSTER", "VENDOR", "MODEL", "DEVICES", "ALLOCATED", "USE", "LIVE UTIL"]
    print(table(rows, header))


async def live_telemetry(fleet: Fleet) -> None:
    """`suanpan top --by vendor` while work runs, then a device fails (XID 79) under the work
    it holds: it leaves service at once and the job holding it hears of it."""
    section("live utilization per vendor from the exporters (suanpan top --by vendor)")
    print(textwrap.indent(await _top(fleet), "  "))
    section("a device error takes the device out of service")
    devices = (await fleet.call("GET", "/v1/telemetry", params={"vendor": "nvidia"}))["items"]
    shared = ([d for d in devices if d["allocatedMilli"]] or devices)[0]
    sim = fleet.clusters[shared["cluster"]]
    assert isinstance(sim, SimulatedCluster)
    sim.readings[(shared["node"], shared["index"])] = Reading(fault="DCGM_FI_DEV_XID_ERRORS=79")

    async def failed() -> bool:
        found = await fleet.call("GET", "/v1/telemetry", params={"cluster": shared["cluster"]})
        return any(d["fault"] and not d["healthy"] for d in found["items"])

    await wait_for("the failed device out of service", failed, 30)
    print(
        f"  {shared['cluster']}/{shared['node']} {shared['flavor']} device {shared['index']}"
        " reports XID 79 (GPU fallen off the bus):"
    )
    print(textwrap.indent(await _top(fleet, cluster=shared["cluster"], vendor="nvidia"), "  "))
    for job in (await fleet.call("GET", "/v1/jobs", params={"limit": "100"}))["items"]:
        events = (await fleet.call("GET", f"/v1/jobs/{job['id']}/events"))["items"]
        for e in events:
            if e["reason"] == "DeviceFailed":
                print(f"  event on job {job['name']}: {e['reason']}: {e['message']}")
    sim.readings.pop((shared["node"], shared["index"]))  # the device is reset and recovers


async def _top(fleet: Fleet, **params: str) -> str:
    devices = (await fleet.call("GET", "/v1/telemetry", params=params))["items"]
    rows, header = top_rows(devices, "cluster" if params else "vendor")
    return table(rows, header)


async def jobs_table(fleet: Fleet) -> None:
    page = (await fleet.call("GET", "/v1/jobs", params={"limit": "100"}))["items"]
    rows = []
    for j in reversed(page):
        rows.append(
            [
                j["id"][:8],
                j["tenant"],
                j["name"],
                j["priorityClass"],
                j["state"],
                j["cluster"] or "-",
            ]
        )
    print(table(rows, ["ID", "TENANT", "JOB", "PRIORITY", "STATE", "CLUSTER"]))


async def scenario(fleet: Fleet) -> None:
    for tenant, quota in (
        ("nlp-lab", {"huawei/Ascend910B3": {"nominal": 48000, "borrowingLimit": 16000}}),
        ("vision-lab", {"nvidia/H100-80GB": {"nominal": 24000, "borrowingLimit": 8000}}),
    ):
        await fleet.call("POST", "/v1/tenants", json={"name": tenant})
        await fleet.call(
            "POST",
            f"/v1/tenants/{tenant}/queues",
            json={"name": "training", "cohort": "research", "quota": quota},
        )
    for name, profile, region in CLUSTERS:
        await fleet.add_cluster(name, profile, region=region)

    async def registered() -> bool:
        clusters = (await fleet.call("GET", "/v1/clusters"))["items"]
        return len([c for c in clusters if c["nodes"]]) == len(CLUSTERS)

    await wait_for("every cluster registered with its nodes", registered, 30)
    await inventory(fleet)

    section("two tenants submit work across vendors")
    submitted = {
        "llm-pretrain": job(
            "llm-pretrain",
            "nlp-lab",
            [task("trainer", ["huawei/Ascend910B3"], 8, replicas=2, run_s=600)],
            priorityClass="high",
        ),
        "vit-sweep": job(
            "vit-sweep",
            "vision-lab",
            [task("trial", ["nvidia/*"], 1, replicas=6, fraction=0.5, run_s=400)],
            priorityClass="low",
            gang=False,
        ),
        "mlu-finetune": job(
            "mlu-finetune", "vision-lab", [task("tune", ["cambricon/*"], 4, run_s=400)]
        ),
        "xpu-eval": job(
            "xpu-eval", "nlp-lab", [task("eval", ["kunlunxin/*", "hygon/*"], 4, run_s=300)]
        ),
        "rlhf-pipeline": job(
            "rlhf-pipeline",
            "nlp-lab",
            [
                {
                    "name": "preprocess",
                    "replicas": 2,
                    "image": "python:3.11",
                    "annotations": {"suanpan.io/run-seconds": "500"},
                    "resources": {"cpu": "16", "memory": "32Gi"},
                },
                task("policy", ["huawei/Ascend910B3"], 4, run_s=500),
            ],
        ),
        "serve-pd": job(
            "serve-pd",
            "vision-lab",
            [
                task("prefill", ["nvidia/H100*"], 4, run_s=500),
                task("decode", ["huawei/Ascend910B3", "metax/*"], 2, replicas=2, run_s=500),
            ],
        ),
    }
    ids: dict[str, str] = {}
    for name, manifest in submitted.items():
        created = await fleet.call(
            "POST", "/v1/jobs", json=manifest, headers={"Idempotency-Key": name}
        )
        ids[name] = created["id"]
    for name in submitted:
        await until_state(fleet, ids[name], {"Running", "Succeeded"}, 30)
    await jobs_table(fleet)
    await utilization(fleet, "utilization per cluster and vendor while the first wave runs")
    for name in ("rlhf-pipeline", "serve-pd"):
        placed = [
            e
            for e in (await fleet.call("GET", f"/v1/jobs/{ids[name]}/events"))["items"]
            if e["reason"] == "Placed"
        ]
        flavors = placed[-1]["data"]["flavors"]
        print(
            f"  heterogeneous {name}: one cluster ({placed[-1]['data']['cluster']}), "
            + ", ".join(f"{t} on {f or 'CPU'}" for t, f in flavors.items())
        )

    await live_telemetry(fleet)

    section("best-effort work fills the idle H100s; then an urgent job arrives")
    # the first wave's H100 work ends first, whatever the machine's speed: the fillers then
    # hold every H100 and the urgent job can only run by preempting
    await finished(fleet, ids, "vit-sweep", "serve-pd")
    fillers = []
    for i in range(3):
        created = await fleet.call(
            "POST",
            "/v1/jobs",
            json=job(
                f"batch-{i}",
                "vision-lab",
                # long enough (300 s real) that they hold every H100 when the urgent job arrives
                [task("w", ["nvidia/H100-80GB"], 8, run_s=6000)],
                priorityClass="best-effort",
            ),
        )
        fillers.append(created["id"])
    for f in fillers:
        await until_state(fleet, f, {"Running"}, 20)
    urgent = await fleet.call(
        "POST",
        "/v1/jobs",
        json=job(
            "incident-retrain",
            "nlp-lab",
            [task("trainer", ["nvidia/H100-80GB"], 8, replicas=2, run_s=40)],
            priorityClass="critical",
        ),
    )
    urgent = await until_state(fleet, urgent["id"], {"Running"}, 40)
    events = (await fleet.call("GET", f"/v1/jobs/{urgent['id']}/events"))["items"]
    preempting = next((e for e in events if e["reason"] == "Preempting"), None)
    print(f"  incident-retrain (critical) is {urgent['state']} on {urgent['cluster']}")
    if preempting:
        print(
            f"  it preempted {len(preempting['data']['victims'])} job(s): {preempting['message']}"
        )
        victim = preempting["data"]["victims"][0]
        ve = (await fleet.call("GET", f"/v1/jobs/{victim}/events"))["items"]
        print(f"  victim {victim[:8]} went: " + " → ".join(e["reason"] for e in ve))
        final = await until_state(fleet, victim, {"Running", "Succeeded"}, 60)
        print(
            f"  victim {victim[:8]} re-ran: {final['state']} on {final['cluster']}"
            f", epoch {final['epoch']}"
        )

    section("a job that waits, and why (suanpan explain)")
    await finished(fleet, ids, "llm-pretrain", "rlhf-pipeline")  # the 16-card nodes are free
    for name in ("long-a", "long-b"):  # take both 16-card Ascend nodes for a while
        blocker = await fleet.call(
            "POST",
            "/v1/jobs",
            json=job(name, "nlp-lab", [task("t", ["huawei/Ascend910B3"], 16, run_s=3000)]),
        )
        await until_state(fleet, blocker["id"], {"Running"}, 20)
    waiting = await fleet.call(
        "POST",
        "/v1/jobs",
        json=job("giant", "nlp-lab", [task("t", ["huawei/Ascend910B3"], 16, run_s=60)]),
    )
    await asyncio.sleep(1.5)
    why = await fleet.call("GET", f"/v1/jobs/{waiting['id']}/explain")
    print(f"  {why['summary'][:200]}")
    for c in why["clusters"]:
        print(f"    {c['cluster']}: [{c['code']}] {c['reason']}")
    impossible = await fleet.call(
        "POST",
        "/v1/jobs",
        json=job("impossible", "nlp-lab", [task("trainer", ["huawei/Ascend910B3"], 64)]),
    )
    print(f"  a job no cluster could ever run is refused at submission ({impossible['status']}):")
    for cluster, reason in sorted(impossible["clusters"].items()):
        print(f"    {cluster}: {reason}")

    section("bad input gets the exact field, and nothing is written")
    bad = job("Bad_Name", "nlp-lab", [{"name": "w", "replicas": 0, "image": "x"}])
    problem = await fleet.call("POST", "/v1/jobs", json=bad)
    print(
        textwrap.indent("\n".join(f"{e['path']}: {e['message']}" for e in problem["errors"]), "  ")
    )

    await utilization(fleet, "utilization per cluster and vendor at the end")
    section("all jobs")
    await jobs_table(fleet)


IMPORTED_PYTORCHJOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: bert-finetune
  annotations:
    suanpan.io/tenant: nlp-lab
    suanpan.io/queue: training
    suanpan.io/image.huawei: ascendhub/pytorch-npu:2.1
    suanpan.io/flavors: huawei/Ascend910B3
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        metadata: {annotations: {suanpan.io/run-seconds: "600"}}
        spec:
          containers:
          - name: pytorch
            image: nvcr.io/nvidia/pytorch:24.05-py3
            command: [torchrun, train.py]
            resources: {limits: {nvidia.com/gpu: 2, cpu: "8", memory: 32Gi}}
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        metadata: {annotations: {suanpan.io/run-seconds: "600"}}
        spec:
          containers:
          - name: pytorch
            image: nvcr.io/nvidia/pytorch:24.05-py3
            command: [torchrun, train.py]
            resources: {limits: {nvidia.com/gpu: 2, cpu: "8", memory: 32Gi}}
"""


async def imported_pytorchjob(fleet: Fleet) -> None:
    """A Kubeflow PyTorchJob written for NVIDIA, imported as it is, runs on Ascend; its pods'
    ranks, hostnames and vendor runtime variables as the agent rendered them."""
    section("an imported Kubeflow PyTorchJob written for NVIDIA runs on Ascend")
    manifest = yaml.safe_load(IMPORTED_PYTORCHJOB)
    submitted = await fleet.call("POST", "/v1/jobs", json=manifest)
    done = await until_state(fleet, submitted["id"], {"Running"}, 60)
    print(f"  {done['name']} ({manifest['kind']}): {done['state']} on {done['cluster']}")
    backend = fleet.clusters.get(done["cluster"] or "")
    assert isinstance(backend, SimulatedCluster), f"{done['name']} did not start: {done}"
    specs = [s for s in backend.pod_specs() if s.job == done["id"]]
    rows = [
        [
            s.task,
            s.env["RANK"],
            f"{s.hostname}.{s.service}",
            s.image,
            s.env["MASTER_ADDR"],
            s.env.get("SUANPAN_DIST_BACKEND", "-"),
            s.env.get("ASCEND_RT_VISIBLE_DEVICES", "-"),
        ]
        for s in sorted(specs, key=lambda s: int(s.env["RANK"]))
    ]
    header = ["TASK", "RANK", "HOSTNAME", "IMAGE", "MASTER_ADDR", "BACKEND", "ASCEND_RT_VISIBLE"]
    print(textwrap.indent(table(rows, header), "  "))
    print(f"  pods in the tenant's namespace {specs[0].namespace} of {done['cluster']}")
    mount = specs[0].rank_table
    if mount is not None:
        await wait_for(
            "the rank table completed",
            lambda: _completed(backend.rank_tables.get((specs[0].namespace, mount.config_map))),
            30,
        )
        hccl = json.loads(backend.rank_tables[(specs[0].namespace, mount.config_map)])
        print(f"  HCCL rank table ({specs[0].env[mount.profile.env]}): {hccl['status']}")
        for server in hccl["server_list"]:
            ranks = ", ".join(
                f"device {d['device_id']}→rank {d['rank_id']}" for d in server["device"]
            )
            print(f"    {server['pod_name']} on {server['server_id']}: {ranks}")
    status, text = await fleet.text(
        f"/v1/jobs/{done['id']}/logs", task="worker", replica="0", tail="3"
    )
    print(f"  suanpan logs {done['name']} --task worker --replica 0 --tail 3 ({status}):")
    print(textwrap.indent(text.rstrip(), "    "))


async def failed_replica(fleet: Fleet) -> None:
    """A replica killed for memory runs again in place (`failurePolicy.backoffLimit: 1`); its
    second failure fails the job. What `suanpan describe` shows of it."""
    section("a replica that fails: its exit code and reason, run again in place, then Failed")
    oom = {
        "name": "w",
        "replicas": 2,
        "image": "python:3.11",
        "annotations": {"suanpan.io/run-seconds": "20", "suanpan.io/fail-reason": "OOMKilled"},
        "resources": {"cpu": "4", "memory": "8Gi"},
    }
    submitted = await fleet.call(
        "POST",
        "/v1/jobs",
        json=job("oom-trial", "vision-lab", [oom], failurePolicy={"backoffLimit": 1}),
    )
    done = await until_state(fleet, submitted["id"], {"Failed"}, 60)
    print(f"  {done['name']}: {done['state']} ({done['reason']}) after {done['attempts']} attempts")
    print(textwrap.indent(table(replica_rows(done["replicas"]), REPLICA_HEADER), "  "))
    events = (await fleet.call("GET", f"/v1/jobs/{done['id']}/events"))["items"]
    for e in events:
        if e["reason"] == "ReplicaFailed" or e["reason"] == done["reason"]:
            print(f"  {e['reason']:<14} {e['message'][:110]}")


async def elastic_job(fleet: Fleet) -> None:
    """An elastic job grows into idle accelerators, gives back its highest replicas to an
    urgent job instead of being evicted, and grows back once that job ends."""
    section("an elastic job grows into idle DCUs, shrinks for an urgent job, grows back")
    elastic = task("train", ["hygon/K100-AI"], 2, run_s=6000)
    del elastic["replicas"]
    submitted = await fleet.call(
        "POST",
        "/v1/jobs",
        json=job("elastic-train", "nlp-lab", [{**elastic, "minReplicas": 1, "maxReplicas": 4}]),
    )

    async def held(count: int) -> bool:
        found = await fleet.call("GET", f"/v1/jobs/{submitted['id']}")
        return bool(found["state"] == "Running" and found["elastic"][0]["replicas"] == count)

    await wait_for("grown to 4 replicas", lambda: held(4), 60)
    grown = await fleet.call("GET", f"/v1/jobs/{submitted['id']}")
    print(f"  elastic-train (1 to 4 replicas of 2 DCUs): Running on {grown['cluster']}, 4 held")
    urgent = await fleet.call(
        "POST",
        "/v1/jobs",
        json=job(
            "dcu-hotfix",
            "nlp-lab",
            [task("t", ["hygon/K100-AI"], 4, run_s=200)],
            priorityClass="critical",
            placement={"clusters": [grown["cluster"]]},
        ),
    )
    await until_state(fleet, urgent["id"], {"Running"}, 30)
    await wait_for("given back to 2 replicas", lambda: held(2), 30)
    print("  dcu-hotfix (critical, 4 DCUs, same cluster) is Running; elastic-train kept running")
    await until_state(fleet, urgent["id"], {"Succeeded"}, 60)
    await wait_for("grown back to 4 replicas", lambda: held(4), 60)
    events = (await fleet.call("GET", f"/v1/jobs/{submitted['id']}/events"))["items"]
    for e in events:
        if e["reason"] in ("Placed", "Resized", "Preempted", "Evicted"):
            print(f"  {e['reason']:<8} {e['message'][:110]}")


async def _serve_pods(fleet: Fleet, load: Load) -> dict[str, int]:
    """Serve the load on the service's pods (by their loopback addresses); ready per cluster."""
    addresses: set[str] = set()
    ready: dict[str, int] = {}
    for name, backend in fleet.clusters.items():
        pods = [p for p in backend.pods() if p.generation and p.pod_ip]
        addresses |= {p.pod_ip for p in pods}
        ready[name] = sum(p.ready for p in pods)
    await load.serve(addresses)
    return {name: n for name, n in ready.items() if n}


async def service_ramp(fleet: Fleet) -> None:
    """A service spread over two clusters scales out under a load ramp and back in, by the
    metric its pods serve (HPA's rule, target 4 requests in flight per replica)."""
    section("a service spreads over two clusters, scales out under a load ramp and back in")
    load = Load("inflight", free_port())
    server = {
        "image": "vllm-serve:0.6",
        "minReplicas": 2,
        "maxReplicas": 8,
        "resources": {"cpu": "4", "memory": "16Gi"},
    }
    manifest = {
        "apiVersion": "suanpan.io/v1",
        "kind": "Service",
        "metadata": {"name": "chat", "tenant": "nlp-lab"},
        "spec": {
            "queue": "training",
            "spread": {"clusters": 2},
            "ports": [{"name": "http", "port": 8000}],
            "autoscaling": {
                "metric": {"name": "inflight", "target": 4, "port": load.port},
                "scaleDownStabilizationSeconds": 10,
            },
            "server": server,
        },
    }
    service = await fleet.call("POST", "/v1/services", json=manifest)
    try:
        for total, wanted in ((4.0, 2), (30.0, 8), (12.0, 3), (2.0, 2)):
            load.total = total
            started = time.monotonic()

            async def reached(count: int = wanted) -> bool:
                return sum((await _serve_pods(fleet, load)).values()) == count

            await wait_for(f"{wanted} ready replicas", reached, 120)
            ready = await _serve_pods(fleet, load)
            spread = ", ".join(f"{c} {n}" for c, n in sorted(ready.items()))
            print(
                f"  load {total:>4g} in flight: {wanted} ready after "
                f"{time.monotonic() - started:4.1f} s ({spread})"
            )
        found = await fleet.call("GET", f"/v1/services/{service['id']}/endpoints")
        for e in found["items"]:
            print(f"  endpoint {e['cluster']}: {e['address']}:{e['ports'][0]['port']}")
        events = (await fleet.call("GET", f"/v1/services/{service['id']}"))["events"]
        for e in events:
            if e["reason"] == "Scaled":
                print(f"  Scaled   {e['message'][:100]}")
    finally:
        await load.close()  # the service stays (at its minimum) for the console's screenshots


async def _completed(content: str | None) -> bool:
    return content is not None and json.loads(content)["status"] == "completed"


async def screenshots(fleet: Fleet) -> None:
    """Screenshots of the console's pages, linked from the README."""
    section("console screenshots in docs/screenshots")
    page = (await fleet.call("GET", "/v1/jobs", params={"limit": "500"}))["items"]
    named = {j["name"]: j["id"] for j in page}
    jobs = {"job-waiting": named["giant"], "job-preempting": named["incident-retrain"]}
    services = {"service": (await fleet.call("GET", "/v1/services/chat"))["id"]}
    for shot in await console_screenshots(fleet.url, ADMIN, SCREENSHOTS, jobs, services):
        print(f"  {shot.name}")


async def main() -> None:
    """Run the demo end to end and print the report."""
    logging.basicConfig(level=logging.ERROR)
    started = time.monotonic()
    async with local_fleet(ADMIN) as fleet:
        print(f"embedded PostgreSQL 16 at {fleet.datadir}; hub at {fleet.url} (ui: {fleet.url}/ui)")
        print(f"simulated clusters run {fleet.time_scale:g}× faster than real time")
        await scenario(fleet)
        await imported_pytorchjob(fleet)
        await failed_replica(fleet)
        await elastic_job(fleet)
        await service_ramp(fleet)
        await screenshots(fleet)
    print(
        f"\ndemo finished in {time.monotonic() - started:.0f} s; the embedded database was removed"
    )


if __name__ == "__main__":
    asyncio.run(main())
