"""A service under a load step and ramp on the simulated fleet: time to scale out, replicas
against demand over time.

The real hub (API, store, scheduling loop and service controller on an embedded PostgreSQL)
and the real agents over two simulated clusters (`deploy.fleet`), Beijing with 8 Ascend 910B3
NPUs and Shenzhen with 16. Service `chat` asks 2 NPUs per replica, 2 to 12 replicas, scaled
by `inflight` with a target of 4 per replica (HPA's rule, scale-down window 15 s); its pods
serve the load this benchmark sets (`deploy.load_ramp`) on their own addresses, and the agents
read it every 5 s. The load steps from 8 to 40 in flight (10 replicas wanted: more than the
first cluster holds, so a shard opens on the other), holds, ramps back down to 8 and holds.
Sampled every second: demand (load / target), the replicas the hub wants, ready replicas.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.plots import series_over_seconds
from bench.results import Figure
from deploy.fleet import Fleet, free_port, local_fleet
from deploy.load_ramp import Load
from deploy.local.kube import wait_for

SECTIONS = Path(__file__).resolve().parent / "sections"
ADMIN = "sp_bench_service_admin"
TARGET = 4.0
LOW, HIGH = 8.0, 40.0
STEP_AT, HOLD_S, RAMP_S, TAIL_S = 10.0, 50.0, 40.0, 40.0
CLUSTERS = (("beijing", "dc-beijing"), ("shenzhen", "dc-shenzhen"))


def demand(t: float) -> float:
    """Requests in flight at `t` seconds: low, a step up, a hold, a ramp down, low again."""
    if t < STEP_AT:
        return LOW
    if t < STEP_AT + HOLD_S:
        return HIGH
    down = (t - STEP_AT - HOLD_S) / RAMP_S
    return HIGH - (HIGH - LOW) * min(down, 1.0)


def manifest(port: int) -> dict[str, object]:
    """Service `chat`: 2 Ascend NPUs per replica, 2 to 12 replicas, `inflight` target 4."""
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Service",
        "metadata": {"name": "chat", "tenant": "serving"},
        "spec": {
            "queue": "online",
            "ports": [{"name": "http", "port": 8000}],
            "autoscaling": {
                "metric": {"name": "inflight", "target": TARGET, "port": port},
                "scaleDownStabilizationSeconds": 15,
            },
            "server": {
                "image": "mindie-serve:1.0",
                "minReplicas": 2,
                "maxReplicas": 12,
                "resources": {
                    "cpu": "4",
                    "memory": "16Gi",
                    "accelerators": {"count": 2, "anyOf": [{"flavor": "huawei/Ascend910B3"}]},
                },
            },
        },
    }


@dataclass
class Trace:
    """Samples over time: seconds, demand in replicas, desired, ready, ready per cluster."""

    t: list[float] = field(default_factory=list)
    needed: list[float] = field(default_factory=list)
    desired: list[float] = field(default_factory=list)
    ready: list[float] = field(default_factory=list)
    per_cluster: list[dict[str, int]] = field(default_factory=list)

    def first(self, after: float, done: object) -> float | None:
        """The first sample time at or after `after` where `done(i)` holds."""
        for i, t in enumerate(self.t):
            if t >= after and done(i):  # type: ignore[operator]
                return t
        return None


async def _sample(fleet: Fleet, service: str, load: Load, start: float, trace: Trace) -> None:
    addresses: set[str] = set()
    per_cluster: dict[str, int] = {}
    for name, backend in fleet.clusters.items():
        pods = [p for p in backend.pods() if p.generation and p.pod_ip]
        addresses |= {p.pod_ip for p in pods}
        per_cluster[name] = sum(p.ready for p in pods)
    await load.serve(addresses)
    found = await fleet.call("GET", f"/v1/services/{service}")
    trace.t.append(time.monotonic() - start)
    trace.needed.append(math.ceil(load.total / TARGET))
    trace.desired.append(found["desired"])
    trace.ready.append(sum(per_cluster.values()))
    trace.per_cluster.append(per_cluster)


async def _run() -> Trace:
    trace = Trace()
    load = Load("inflight", free_port())
    async with local_fleet(ADMIN) as fleet:
        await fleet.call("POST", "/v1/tenants", json={"name": "serving"})
        await fleet.call("POST", "/v1/tenants/serving/queues", json={"name": "online"})
        for name, profile in CLUSTERS:
            await fleet.add_cluster(name, profile, region=name)

        async def registered() -> bool:
            found = (await fleet.call("GET", "/v1/clusters"))["items"]
            return len([c for c in found if c["nodes"]]) == len(CLUSTERS)

        await wait_for("both clusters registered", registered, 30)
        service = (await fleet.call("POST", "/v1/services", json=manifest(load.port)))["id"]
        start = time.monotonic()
        end = STEP_AT + HOLD_S + RAMP_S + TAIL_S
        try:
            while (now := time.monotonic() - start) < end:
                load.total = demand(now)
                await _sample(fleet, service, load, start, trace)
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - start - now)))
        finally:
            await load.close()
    return trace


def _figures(trace: Trace) -> tuple[list[Figure], dict[str, float | None]]:
    wanted = math.ceil(HIGH / TARGET)
    out = trace.first(STEP_AT, lambda i: trace.ready[i] >= wanted)
    second = trace.first(STEP_AT, lambda i: sum(1 for n in trace.per_cluster[i].values() if n) > 1)
    back = STEP_AT + HOLD_S + RAMP_S
    scaled_in = trace.first(back, lambda i: trace.ready[i] <= math.ceil(LOW / TARGET))
    numbers = {
        "service_scale_out_s": None if out is None else out - STEP_AT,
        "service_second_cluster_s": None if second is None else second - STEP_AT,
        "service_scale_in_s": None if scaled_in is None else scaled_in - back,
        "service_peak_ready": float(max(trace.ready, default=0)),
    }
    params = {"step": f"{LOW:g} -> {HIGH:g} in flight", "target": TARGET}
    figures = [
        Figure(name, value, "s" if name.endswith("_s") else "replicas", False, params)
        for name, value in numbers.items()
        if value is not None
    ]
    return figures, numbers


def _section(trace: Trace, numbers: dict[str, float | None]) -> str:
    def fmt(value: float | None) -> str:
        return "never" if value is None else f"{value:.0f} s"

    peak = max(range(len(trace.ready)), key=lambda i: trace.ready[i], default=0)
    spread = ", ".join(f"{c} {n}" for c, n in sorted(trace.per_cluster[peak].items()) if n)
    return "\n".join(
        [
            "## A service under a load step and ramp (simulated fleet, real hub and agents)",
            "",
            f"Service `chat` (2 Ascend 910B3 per replica, 2 to 12 replicas, target {TARGET:g} "
            "requests in flight per replica, scale-down window 15 s) on Beijing (8 NPUs) and "
            f"Shenzhen (16 NPUs); load {LOW:g} in flight, a step to {HIGH:g} at {STEP_AT:g} s "
            f"(10 replicas wanted), held {HOLD_S:g} s, ramped down over {RAMP_S:g} s. The agents "
            "read the pods' metric every 5 s.",
            "",
            "| figure | value |",
            "|---|---:|",
            f"| step to all 10 replicas ready | {fmt(numbers['service_scale_out_s'])} |",
            f"| step to a ready replica in a second cluster | "
            f"{fmt(numbers['service_second_cluster_s'])} |",
            f"| end of the ramp to 2 replicas | {fmt(numbers['service_scale_in_s'])} |",
            f"| most replicas ready | {numbers['service_peak_ready']:.0f} ({spread}) |",
            "",
            "![replicas against demand](service_ramp.png)",
            "",
        ]
    )


def run() -> list[Figure]:
    """Run the ramp; write the section and the plot; return the figures."""
    trace = asyncio.run(_run())
    SECTIONS.mkdir(parents=True, exist_ok=True)
    t = np.array(trace.t)
    curves = {
        "demand / target": (t, np.array(trace.needed, dtype=float)),
        "desired": (t, np.array(trace.desired, dtype=float)),
        "ready": (t, np.array(trace.ready, dtype=float)),
    }
    series_over_seconds(curves, "replicas", "service chat", SECTIONS / "service_ramp.png")
    figures, numbers = _figures(trace)
    (SECTIONS / "service_ramp.md").write_text(_section(trace, numbers))
    return figures
