"""HCCL rank tables: the format HCCL reads, built only once every member is bound with an
address, and written by the agent into the placement's ConfigMap when it changes."""

from __future__ import annotations

import asyncio
import json

from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.backend import PodStatus
from cluster_agents.agent.ranktable import (
    INITIALIZING,
    Member,
    device_addresses,
    placement_tables,
    rank_table,
)
from cluster_agents.agent.render import render
from cluster_agents.backends.k8s_pods import managed_pod
from cluster_agents.backends.simulated import SimNodeSpec, SimulatedCluster
from federation.k8s_names import tenant_namespace
from tests.compiled_jobs import assignment
from tests.unit.backends.k8s_objects import CATALOG, suanpan_pod

PROFILE = CATALOG.models["huawei/Ascend910B3"].runtime.rank_table
JOB = "0f5c2a8e-3b7d-4c1e-9a6f-2d8b4e7c1a90"
TRAINER = {
    "name": "trainer",
    "replicas": 2,
    "image": "mindspore:2.3",
    "resources": {"accelerators": {"count": 2, "anyOf": [{"flavor": "huawei/Ascend910B3"}]}},
}
GANG = assignment(CATALOG, [TRAINER], {"trainer": "huawei/Ascend910B3"}, job=JOB, epoch=1)


def test_the_catalog_says_ascend_reads_a_rank_table_and_nvidia_does_not() -> None:
    assert PROFILE is not None
    assert (PROFILE.format, PROFILE.env) == ("hccl-1.0", "RANK_TABLE_FILE")
    assert CATALOG.models["nvidia/H100-80GB"].runtime.rank_table is None


def test_hccl_rank_table_lists_every_server_with_global_device_ranks() -> None:
    assert PROFILE is not None
    members = [
        Member("p0", "10.0.0.1", "10.244.0.5", (4, 5)),
        Member("p1", "10.0.0.2", "10.244.1.7", (0, 1)),
    ]

    def server(host: str, ip: str, pod: str, *ids: tuple[int, int]) -> dict[str, object]:
        devices = [{"device_id": str(d), "rank_id": str(r)} for d, r in ids]
        return {"server_id": host, "container_ip": ip, "pod_name": pod, "device": devices}

    assert json.loads(rank_table(PROFILE, members)) == {
        "status": "completed",
        "version": "1.0",
        "server_count": "2",
        "server_list": [
            server("10.0.0.1", "10.244.0.5", "p0", (4, 0), (5, 1)),
            server("10.0.0.2", "10.244.1.7", "p1", (0, 2), (1, 3)),  # ranks go on counting
        ],
    }


def test_the_table_stays_initializing_until_every_member_is_bound_with_an_address() -> None:
    assert PROFILE is not None
    bound = Member("p0", "10.0.0.1", "10.244.0.5", (0,))
    for missing in (Member("p1", "", "", ()), Member("p1", "10.0.0.1", "", (1,))):
        assert rank_table(PROFILE, [bound, missing]) == INITIALIZING
    assert rank_table(PROFILE, []) == INITIALIZING


def test_placement_tables_take_the_pods_in_rank_order_and_ignore_deleting_ones() -> None:
    specs = render(GANG, "suanpan", CATALOG)
    assert [s.rank_table is not None for s in specs] == [True, True]
    assert all(
        s.env["RANK_TABLE_FILE"] == "/user/serverid/devindex/config/hccl.json" for s in specs
    )

    def running(index: int, deleting: bool = False) -> PodStatus:
        name = specs[index].name
        return PodStatus(
            name, JOB, 1, "trainer", index, "Running", node=f"n{index}", deleting=deleting,
            host_ip=f"10.0.0.{index}", pod_ip=f"10.244.0.{index}", devices=(index,),
        )  # fmt: skip

    ((key, content),) = placement_tables(specs, [running(0), running(1)]).items()
    assert key == (tenant_namespace("suanpan", "t"), specs[0].rank_table)
    table = json.loads(content)
    assert [s["pod_name"] for s in table["server_list"]] == [s.name for s in specs]
    (again,) = placement_tables(specs, [running(0), running(1, deleting=True)]).values()
    assert again == INITIALIZING  # a replaced replica gets a new address: wait for it


class Hub:
    async def status(self, report: object) -> None:
        return None


async def test_the_agent_writes_the_table_once_the_gang_is_bound() -> None:
    node = SimNodeSpec(
        "ascend-0",
        {"node.kubernetes.io/npu.chip.name": "910B3"},
        {"cpu": "64", "memory": "256Gi", "huawei.com/Ascend910B3": "8"},
    )
    sim = SimulatedCluster(CATALOG, [node], tick_s=0.01)
    agent = Agent(AgentConfig("c"), sim, CATALOG, Hub())  # type: ignore[arg-type]
    agent.active[JOB] = GANG
    agent.caught_up = True
    await sim.start()
    try:
        specs = render(GANG, "suanpan", CATALOG)
        (key,) = {(s.namespace, s.rank_table.config_map) for s in specs if s.rank_table}
        await agent.reconcile()
        assert sim.rank_tables[key] == INITIALIZING  # created with the pods, before binding
        for _ in range(200):
            await agent.reconcile()
            if sim.rank_tables[key] != INITIALIZING:
                break
            await asyncio.sleep(0.01)
        table = json.loads(sim.rank_tables[key])
        devices = sorted(int(d["device_id"]) for s in table["server_list"] for d in s["device"])
        assert table["status"] == "completed" and len(devices) == len(set(devices)) == 4
        assert [d["rank_id"] for s in table["server_list"] for d in s["device"]] == list("0123")
        await sim.delete_pods([p.name for p in sim.pods()], 0)
        assert key not in sim.rank_tables  # gone with the placement's pods
    finally:
        await sim.stop()


MINDCLUSTER = "ascend.kubectl.kubernetes.io/ascend-910-configuration"


def test_device_addresses_come_from_the_device_plugins_annotation() -> None:
    assert PROFILE is not None and PROFILE.device_annotation == MINDCLUSTER
    assert CATALOG.device_address_annotations() == {MINDCLUSTER}
    given = {
        "pod_name": "p0",
        "server_id": "10.0.0.1",
        "devices": [
            {"device_id": "5", "device_ip": "192.168.1.5"},
            {"device_id": "4", "device_ip": "192.168.1.4"},
        ],
    }
    addresses = device_addresses(json.dumps(given))
    assert addresses == ((4, "192.168.1.4"), (5, "192.168.1.5"))
    for broken in ("", "{", "[]", '{"devices": [{"device_id": "x"}]}'):
        assert device_addresses(broken) == ()
    member = Member("p0", "10.0.0.1", "10.2.0.1", (4, 5), addresses)
    table = json.loads(rank_table(PROFILE, [member]))
    (server,) = table["server_list"]
    assert [d["device_ip"] for d in server["device"]] == ["192.168.1.4", "192.168.1.5"]


def test_the_backend_reads_the_addresses_of_a_bound_pod() -> None:
    obj = suanpan_pod("sp-a-0", "n1", devices="4,5", status={"phase": "Running"})
    obj["status"] |= {"hostIP": "10.0.0.1", "podIP": "10.244.0.9"}
    obj["metadata"]["annotations"][MINDCLUSTER] = json.dumps(
        {"devices": [{"device_id": "4", "device_ip": "192.168.1.4"}]}
    )
    parsed = managed_pod(obj, CATALOG.device_address_annotations())
    assert parsed is not None
    assert (parsed.host_ip, parsed.pod_ip, parsed.devices) == ("10.0.0.1", "10.244.0.9", (4, 5))
    assert parsed.device_ips == ((4, "192.168.1.4"),)
