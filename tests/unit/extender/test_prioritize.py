"""Prioritize: 0-10 scores from the placement policies over a pool mirrored from the cache."""

from __future__ import annotations

import random
from typing import Any

import pytest

from cluster_agents.extender import POLICIES, Cache, Prioritizer
from cluster_agents.kube.pods import Demand, pod_demand
from tests.unit.extender.builders import ascend_910a, ascend_910b, cache, pod

B3 = "huawei/Ascend910B3"


def demand(c: Cache, **want: Any) -> Demand:
    d = pod_demand(c.catalog, pod("new", flavor=B3, **want))
    assert d is not None
    return d


def busy(name: str, used: int, node: str) -> dict[str, object]:
    return pod(name, flavor=B3, count=used, node_name=node, devices=",".join(map(str, range(used))))


def cluster() -> Cache:
    return cache(
        ascend_910b("empty"),
        ascend_910b("half"),
        ascend_910b("b16", 16),
        ascend_910a("other-model"),
        pods=(busy("x", 4, "half"),),
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_scores_are_0_to_10_and_0_where_the_pod_does_not_fit(policy: str) -> None:
    c = cluster()
    scores = Prioritizer(c, policy).scores(
        demand(c, count=6), ["empty", "half", "b16", "other-model"]
    )
    assert set(scores) == {"empty", "half", "b16", "other-model"}
    assert all(0 <= s <= 10 for s in scores.values())
    assert scores["half"] == 0 and scores["other-model"] == 0  # 4 free < 6; wrong model
    assert max(scores.values()) == 10


def test_binpack_fills_the_fuller_node_and_spread_the_emptier() -> None:
    c = cluster()
    names = ["empty", "half"]
    assert Prioritizer(c, "binpack").scores(demand(c, count=2), names) == {"empty": 0, "half": 10}
    assert Prioritizer(c, "spread").scores(demand(c, count=2), names) == {"empty": 10, "half": 0}


def test_the_mirrored_pool_follows_every_change() -> None:
    c = cluster()
    incremental = Prioritizer(c, "suanpan")
    rng = random.Random(7)
    names = ["empty", "half", "b16"]
    bound: list[str] = []
    for step in range(40):
        d = demand(c, count=rng.choice([1, 2, 4]))
        assert incremental.scores(d, names) == Prioritizer(c, "suanpan").scores(d, names), step
        if bound and rng.random() < 0.3:
            c.remove_pod(bound.pop(rng.randrange(len(bound))))
            continue
        node = rng.choice(names)
        occupancy = c.occupancy(node, B3).devices
        free = [i for i in range(occupancy.size) if occupancy.is_free(i)][: d.request.count]
        if len(free) == d.request.count:
            p = pod(
                f"p{step}",
                flavor=B3,
                count=len(free),
                node_name=node,
                devices=",".join(map(str, free)),
            )
            c.set_pod(p)
            bound.append(p["metadata"]["uid"])
        if step == 20:
            c.set_node(ascend_910b("late"))  # a new node: the pool is rebuilt
            names.append("late")


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        Prioritizer(cluster(), "random")
