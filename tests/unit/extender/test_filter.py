"""Filter and device choice on tables of nodes, per vendor topology."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from cluster_agents.extender import choose, filter_nodes
from cluster_agents.extender.cache import Cache
from cluster_agents.kube.pods import Demand, pod_demand
from tests.unit.extender.builders import (
    A100,
    ascend_910a,
    ascend_910b,
    cache,
    kunlun,
    node,
    nvidia,
    pod,
)


@dataclass(frozen=True)
class Case:
    name: str
    node: dict[str, Any]
    want: dict[str, Any]  # pod() keyword arguments of the pod to place
    held: tuple[str, ...] = ()  # DEVICES of pods already bound there (whole devices)
    code: str = "ok"  # ok | insufficient | unresolvable
    detail: str = ""  # part of the reason, or the devices chosen (pack) when ok


ASCEND_910C = node(
    "c",
    {"huawei.com/Ascend910C": 16},
    {"accelerator": "huawei-Ascend910", "accelerator-type": "module-a3-16"},
)
MLU = node("m", {"cambricon.com/mlu": 8}, {"cambricon.com/mlu.model": "MLU370-X8"})

CASES = [
    Case(
        "910A: 3 NPUs never fit an HCCS ring",
        ascend_910a("a"),
        {"flavor": "huawei/Ascend910A", "count": 3},
        code="unresolvable",
        detail="3 devices not allowed by topology (1,2,4,8)",
    ),
    Case(
        "910A: 4 NPUs need one whole ring",
        ascend_910a("a"),
        {"flavor": "huawei/Ascend910A", "count": 4},
        held=("0", "4"),
        code="insufficient",
        detail="needs 4 free devices in one group of 4, largest feasible 2 (6 free)",
    ),
    Case(
        "910A: 8 is the whole node",
        ascend_910a("a"),
        {"flavor": "huawei/Ascend910A", "count": 8},
        detail="0,1,2,3,4,5,6,7",
    ),
    Case(
        "910A from resources only",
        ascend_910a("a"),
        {"resources": {"huawei.com/Ascend910A": "2"}},
        held=("0",),
        detail="1,2",
    ),
    Case(
        "910B x16: 12 NPUs as 6+6",
        ascend_910b("b", 16),
        {"flavor": "huawei/Ascend910B3", "count": 12},
        detail="0,1,2,3,4,5,8,9,10,11,12,13",
    ),
    Case(
        "910B x16: 9 NPUs never",
        ascend_910b("b", 16),
        {"flavor": "huawei/Ascend910B3", "count": 9},
        code="unresolvable",
        detail="9 devices not allowed by topology",
    ),
    Case(
        "910B x16: 6+6 blocked by 3 in ring 0",
        ascend_910b("b", 16),
        {"flavor": "huawei/Ascend910B3", "count": 12},
        held=("0,1,2",),
        code="insufficient",
        detail="as 2 groups of 6",
    ),
    Case(
        "910B x16: 8 goes into the intact ring",
        ascend_910b("b", 16),
        {"flavor": "huawei/Ascend910B3", "count": 8},
        held=("0",),
        detail="8,9,10,11,12,13,14,15",
    ),
    Case(
        "910B x8: any count",
        ascend_910b("b"),
        {"flavor": "huawei/Ascend910B3", "count": 3},
        held=("1",),
        detail="0,2,3",
    ),
    Case(
        "910B x8: more than the node",
        ascend_910b("b"),
        {"flavor": "huawei/Ascend910B3", "count": 12},
        code="unresolvable",
        detail="needs 12 devices, node has 8",
    ),
    Case(
        "910C: odd counts above 1 never",
        ASCEND_910C,
        {"flavor": "huawei/Ascend910C", "count": 3},
        code="unresolvable",
        detail="not allowed by topology",
    ),
    Case(
        "910C: pairs take whole modules",
        ASCEND_910C,
        {"flavor": "huawei/Ascend910C", "count": 2},
        held=("0",),
        detail="2,3",
    ),
    Case(
        "P800: 3 XPUs never",
        kunlun("x"),
        {"flavor": "kunlunxin/P800", "count": 3},
        code="unresolvable",
        detail="(1,2,4,8)",
    ),
    Case(
        "P800: 4 need a whole wing",
        kunlun("x"),
        {"flavor": "kunlunxin/P800", "count": 4},
        held=("1", "5"),
        code="insufficient",
        detail="in one group of 4",
    ),
    Case(
        "MLU370: 3 never",
        MLU,
        {"flavor": "cambricon/MLU370-X8", "count": 3},
        code="unresolvable",
        detail="(1,2,4,8)",
    ),
    Case(
        "NVIDIA: the shared resource resolves by product label",
        nvidia("g"),
        {"resources": {"nvidia.com/gpu": "2"}},
        held=("0,1",),
        detail="2,3",
    ),
    Case(
        "NVIDIA: the wrong model is unresolvable",
        nvidia("g"),
        {"flavor": "nvidia/A100-80GB", "count": 1},
        code="unresolvable",
        detail="no such devices on the node",
    ),
    Case(
        "NVIDIA: a share takes one device",
        nvidia("g"),
        {"flavor": "nvidia/H100-80GB", "milli": 300, "memory_mib": 20000},
        held=("0",),
        detail="1",
    ),
    Case(
        "NVIDIA: no room for a share on whole-used devices",
        nvidia("g", n=2),
        {"flavor": "nvidia/H100-80GB", "milli": 300},
        held=("0", "1"),
        code="insufficient",
        detail="most free on a device 0m",
    ),
    Case(
        "NVIDIA: a share too big for the memory",
        nvidia("g", A100),
        {"flavor": "nvidia/A100-80GB", "milli": 500, "memory_mib": 90000},
        code="unresolvable",
        detail="largest device has 81920 MiB",
    ),
    Case(
        "NVIDIA: a full node is only insufficient",
        nvidia("g", n=2),
        {"flavor": "nvidia/H100-80GB", "count": 1},
        held=("0", "1"),
        code="insufficient",
        detail="largest feasible 0 (0 free)",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_filter_and_choice(case: Case) -> None:
    name = case.node["metadata"]["name"]
    c = cache(case.node)
    model = c.nodes[name].devices[0].model.key
    for i, devices in enumerate(case.held):
        count = len(devices.split(","))
        c.set_pod(pod(f"held-{i}", flavor=model, count=count, node_name=name, devices=devices))
    demand = pod_demand(c.catalog, pod("new", **case.want))
    assert demand is not None
    outcome = filter_nodes(c, demand, [name])
    if case.code == "ok":
        assert outcome.passed == [name]
        _, decision = choose(c, demand, name, "pack")
        assert ",".join(map(str, decision.devices)) == case.detail
        return
    failures = outcome.failed if case.code == "insufficient" else outcome.unresolvable
    assert list(failures) == [name] and not outcome.passed
    assert case.detail in failures[name]
    assert failures[name].startswith(demand.target + ": ")


def _full_empty_and_other_model() -> tuple[Cache, Demand]:
    """Two 910B3 nodes, `full` (8 NPUs held) and `empty`, a 910A node `a`; a pod for 8 910B3."""
    c = cache(
        ascend_910b("full"),
        ascend_910b("empty"),
        ascend_910a("a"),
        pods=(
            pod(
                "x",
                flavor="huawei/Ascend910B3",
                count=8,
                node_name="full",
                devices="0,1,2,3,4,5,6,7",
            ),
        ),
    )
    demand = pod_demand(c.catalog, pod("p", flavor="huawei/Ascend910B3", count=8))
    assert demand is not None
    return c, demand


def test_full_node_stays_a_preemption_candidate_and_others_do_not() -> None:
    c, demand = _full_empty_and_other_model()
    outcome = filter_nodes(c, demand, ["full", "a", "ghost"])
    assert outcome.passed == []
    assert set(outcome.failed) == {"full", "ghost"}  # ghost: not cached yet, may appear
    assert set(outcome.unresolvable) == {"a"}
    assert outcome.failed["full"] == (
        "huawei/Ascend910B3: needs 8 free devices on the node, largest feasible 0 (0 free)"
    )
    assert (outcome.insufficient_count, outcome.unresolvable_count) == (2, 1)


def test_reasons_are_left_out_when_a_node_fits() -> None:
    """kube-scheduler reads why nodes failed only when none passed (its diagnosis and its
    preemption): with one that fits, the reasons are not worked out, only counted."""
    c, demand = _full_empty_and_other_model()
    outcome = filter_nodes(c, demand, ["full", "empty", "a", "ghost"])
    assert outcome.passed == ["empty"]
    assert outcome.failed == {} and outcome.unresolvable == {}
    assert (outcome.insufficient_count, outcome.unresolvable_count) == (2, 1)
    assert c.fit_table(demand).failed == {"full": None}  # not worked out
    assert c.fit("full", demand).reason.startswith("huawei/Ascend910B3: needs 8 free devices")


def test_spread_takes_the_freest_group() -> None:
    c = cache(
        ascend_910a("a"), pods=(pod("x", flavor="huawei/Ascend910A", node_name="a", devices="0"),)
    )
    demand = pod_demand(c.catalog, pod("p", flavor="huawei/Ascend910A", count=2))
    assert demand is not None
    assert choose(c, demand, "a", "pack")[1].devices == (1, 2)
    assert choose(c, demand, "a", "spread")[1].devices == (4, 5)
