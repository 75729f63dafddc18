"""The loop's fleet cache reads only what inventory reports wrote, and still sees the fleet as
a fresh read does.

A random run of inventory reports (deltas that add, change and remove nodes, full snapshots,
telemetry readings) over two clusters, one to three between two reads: the nodes read through
a warm cache equal those read with no cache at all, node for node and in the same order.
"""

from __future__ import annotations

import random
import uuid

import pytest

from federation.catalog import load_catalog
from federation.controllers.snapshot import FleetCache, clusters_of_fleet
from federation.store import agents
from federation.store.clusters import ensure_cluster
from federation.store.database import Database
from federation.store.telemetry import apply_telemetry
from federation.wire.agent import DeviceInfo, InventoryReport, NodeInfo, Registration
from federation.wire.telemetry import DeviceTelemetry, TelemetryReport

pytestmark = pytest.mark.integration

FLAVOR = "huawei/Ascend910B3"


def _node(name: str, rng: random.Random) -> NodeInfo:
    return NodeInfo.model_validate(
        {
            "name": name,
            "labels": {"node.kubernetes.io/npu.chip.name": "910B3"},
            "cpuMilli": 192_000,
            "memoryMib": 1_048_576,
            "usedCpuMilli": rng.choice([0, 8_000, 64_000]),
            "devices": [
                DeviceInfo(
                    flavor=FLAVOR,
                    index=i,
                    memory_mib=65_536,
                    used_milli=rng.choice([0, 1000]),
                    healthy=rng.random() > 0.1,
                ).model_dump(by_alias=True)
                for i in range(8)
            ],
        }
    )


async def test_a_warm_fleet_cache_reads_what_a_fresh_read_does(db: Database) -> None:
    rng = random.Random(7)
    catalog = load_catalog()
    ids: dict[str, uuid.UUID] = {}
    present: dict[str, set[str]] = {}
    generation: dict[str, int] = {}
    async with db.transaction() as conn:
        for name in ("east", "west"):
            ids[name] = await ensure_cluster(conn, name)
            await agents.register(conn, ids[name], Registration(cluster=name))
            present[name], generation[name] = set(), 0
    cache = FleetCache()
    for step in range(40):
        said = []
        for _ in range(rng.randint(1, 3)):  # reports between two cycles
            name = rng.choice(["east", "west"])
            cluster_id, gen = ids[name], generation[name] + 1
            kind = rng.choice(["delta", "delta", "delta", "full", "telemetry"])
            said.append(f"{kind} of {name}")
            async with db.transaction() as conn:
                if kind == "telemetry" and present[name]:
                    node = rng.choice(sorted(present[name]))
                    reading = DeviceTelemetry(
                        node=node,
                        flavor=FLAVOR,
                        index=rng.randrange(8),
                        utilization=100 * rng.random(),
                    )
                    await apply_telemetry(conn, cluster_id, TelemetryReport(devices=[reading]))
                elif kind == "full":
                    names = {f"n{i:02d}" for i in rng.sample(range(30), rng.randint(0, 12))}
                    report = InventoryReport(
                        generation=gen, full=True, nodes=[_node(n, rng) for n in sorted(names)]
                    )
                    await agents.apply_inventory(conn, cluster_id, report)
                    present[name], generation[name] = names, gen
                else:
                    upserts = {f"n{i:02d}" for i in rng.sample(range(30), rng.randint(0, 4))}
                    removed = set(rng.sample(sorted(present[name]), min(2, len(present[name]))))
                    removed -= upserts
                    report = InventoryReport(
                        generation=gen,
                        full=False,
                        nodes=[_node(n, rng) for n in sorted(upserts)],
                        removed=sorted(removed),
                    )
                    await agents.apply_inventory(conn, cluster_id, report)
                    present[name] = (present[name] | upserts) - removed
                    generation[name] = gen
        async with db.transaction() as conn:
            warm, _ = await clusters_of_fleet(conn, catalog, cache)
            fresh, _ = await clusters_of_fleet(conn, catalog)
        assert warm == fresh, f"step {step}: {said}"
        assert {c.name: {n.name for n in c.nodes} for c in warm} == present
