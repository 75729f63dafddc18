"""Filter keeps the node the pod goes to: the hub's hinted node when it fits, else the policy's
best; kube-scheduler then neither scores nor calls prioritize."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_agents.extender import POLICIES, Extender
from cluster_agents.extender.service import FILTER_KEEPS_ALL
from federation.wire import annotations as wire
from tests.unit.extender.builders import FakeAPI, ascend_910b, cache, pod
from tests.unit.extender.test_prioritize import cluster

B3 = "huawei/Ascend910B3"
NAMES = ["empty", "half", "b16", "other-model"]


def busy(name: str, node: str, devices: list[int]) -> dict[str, Any]:
    return pod(
        name,
        flavor=B3,
        count=len(devices),
        node_name=node,
        devices=",".join(map(str, devices)),
    )


def args(p: dict[str, Any], names: list[str] = NAMES) -> dict[str, Any]:
    return {"Pod": p, "NodeNames": names}


def hinted(count: int, hint: str) -> dict[str, Any]:
    p = pod("new", flavor=B3, count=count)
    p["metadata"]["annotations"][wire.HINT_DEVICES] = hint
    return p


@pytest.mark.parametrize("policy", POLICIES)
def test_filter_keeps_the_node_prioritize_would_score_highest(policy: str) -> None:
    c = cluster()
    ext = Extender(c, FakeAPI(cache=c), policy)
    p = pod("new", flavor=B3, count=2)
    result = ext.filter(args(p))
    scores = {e["Host"]: e["Score"] for e in ext.prioritize(args(p))}
    assert len(result["NodeNames"]) == 1
    assert scores[result["NodeNames"][0]] == max(scores.values()) == 10
    # nodes that fit are never reported as failed; with one that fits, none is
    assert result["FailedAndUnresolvableNodes"] == {} and result["FailedNodes"] == {}


def test_binpack_keeps_the_fuller_node_and_spread_the_emptier() -> None:
    c = cluster()
    names = ["empty", "half"]
    p = pod("new", flavor=B3, count=2)
    assert Extender(c, FakeAPI(), "binpack").filter(args(p, names))["NodeNames"] == ["half"]
    assert Extender(c, FakeAPI(), "spread").filter(args(p, names))["NodeNames"] == ["empty"]


def test_the_hubs_hinted_node_wins_when_the_pod_fits_there() -> None:
    c = cluster()
    ext = Extender(c, FakeAPI(), "binpack")  # would keep "half"
    assert ext.filter(args(hinted(2, "empty:0,1")))["NodeNames"] == ["empty"]
    # a hint where the pod does not fit (4 free NPUs on "half"; wrong model) is passed over
    assert ext.filter(args(hinted(6, "half:4,5,6,7,0,1")))["NodeNames"] == ["empty"]
    assert ext.filter(args(hinted(2, "other-model:0,1")))["NodeNames"] == ["half"]
    # a hint naming a node kube-scheduler did not send is passed over too
    assert ext.filter(args(hinted(2, "b16:0,1"), ["empty", "half"]))["NodeNames"] == ["half"]


def test_filter_keeps_all_leaves_the_choice_to_kube_scheduler() -> None:
    c = cluster()
    ext = Extender(c, FakeAPI(), "binpack", filter_keeps=FILTER_KEEPS_ALL)
    result = ext.filter(args(pod("new", flavor=B3, count=2)))
    assert result["NodeNames"] == ["empty", "half", "b16"]


def test_a_pod_without_our_devices_passes_everywhere() -> None:
    c = cluster()
    assert Extender(c, FakeAPI()).filter(args(pod("cpu")))["NodeNames"] == NAMES


def test_an_unknown_filter_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="filter_keeps"):
        Extender(cluster(), FakeAPI(), filter_keeps="some")


@settings(max_examples=60, deadline=None)
@given(
    used=st.lists(st.lists(st.integers(0, 7), max_size=8, unique=True), min_size=3, max_size=3),
    count=st.sampled_from([1, 2, 4, 8]),
    policy=st.sampled_from(POLICIES),
    order=st.permutations(["n0", "n1", "n2"]),
)
def test_the_kept_node_fits_and_is_the_policys_first_best(
    used: list[list[int]], count: int, policy: str, order: list[str]
) -> None:
    """Whatever the occupancy, filter keeps one node where the pod fits, one prioritize
    scores highest (a clear best whatever the order kube-scheduler sends); none if none fits."""
    pods = tuple(busy(f"u{i}", f"n{i}", sorted(d)) for i, d in enumerate(used) if d)
    c = cache(*(ascend_910b(f"n{i}") for i in range(3)), pods=pods)
    ext = Extender(c, FakeAPI(), policy)
    p = pod("new", flavor=B3, count=count)
    kept = ext.filter(args(p, order))["NodeNames"]
    everywhere = Extender(c, FakeAPI(), policy, filter_keeps=FILTER_KEEPS_ALL)
    fitting = everywhere.filter(args(p, order))["NodeNames"]
    if not fitting:
        assert kept == []
        return
    scores = {e["Host"]: e["Score"] for e in ext.prioritize(args(p, order))}
    assert len(kept) == 1 and kept[0] in fitting and scores[kept[0]] == 10
    if all(scores[n] < 10 for n in fitting if n != kept[0]):
        assert ext.filter(args(p, order[::-1]))["NodeNames"] == kept  # a clear best: any order
