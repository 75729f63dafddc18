"""The wire format exactly as kube-scheduler's extender/v1 types (reference section D)."""

from __future__ import annotations

import json
from typing import Any

from cluster_agents.extender import Cache, Extender
from tests.unit.extender.builders import CATALOG, FakeAPI, ascend_910a, ascend_910b, cache, pod

B3 = "huawei/Ascend910B3"


def extender(c: Cache | None = None) -> tuple[Extender, FakeAPI]:
    c = c or cache(ascend_910b("b8"), ascend_910b("b16", 16), ascend_910a("a"))
    api = FakeAPI(cache=c)
    return Extender(c, api), api


def roundtrip(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_filter_result_uses_go_field_names() -> None:
    ext, _ = extender()
    body = {"Pod": pod("p", flavor=B3, count=12), "Nodes": None, "NodeNames": ["b8", "a"]}
    assert roundtrip(ext.filter(body)) == {
        "Nodes": None,
        "NodeNames": [],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {
            "b8": "huawei/Ascend910B3: needs 12 devices, node has 8",
            "a": "huawei/Ascend910B3: no such devices on the node",
        },
        "Error": "",
    }


def test_keys_are_matched_case_insensitively_like_go() -> None:
    ext, _ = extender()
    result = ext.filter({"pod": pod("p", flavor=B3, count=2), "nodenames": ["b8"]})
    assert result["NodeNames"] == ["b8"] and result["Error"] == ""


def test_full_nodes_are_answered_with_nodes() -> None:
    ext, _ = extender()
    items = [{"metadata": {"name": n}} for n in ("b8", "a")]
    result = ext.filter({"Pod": pod("p", flavor=B3), "Nodes": {"items": items}, "NodeNames": None})
    assert result["Nodes"] == {"items": [{"metadata": {"name": "b8"}}]}
    assert result["NodeNames"] is None


def test_prioritize_answers_a_host_priority_list() -> None:
    ext, _ = extender()
    body = {"Pod": pod("p", flavor=B3, count=2), "NodeNames": ["b8", "b16", "a"]}
    result = roundtrip(ext.prioritize(body))
    assert [set(entry) for entry in result] == [{"Host", "Score"}] * 3
    assert [e["Host"] for e in result] == ["b8", "b16", "a"]
    assert all(isinstance(e["Score"], int) and 0 <= e["Score"] <= 10 for e in result)


async def test_bind_answers_an_error_field() -> None:
    ext, api = extender()
    p = pod("p", flavor=B3, count=4)
    api.add(p)
    meta = p["metadata"]
    body = {"PodName": "p", "PodNamespace": "default", "PodUID": meta["uid"], "Node": "b8"}
    assert await ext.bind(body) == {"Error": ""}
    assert meta["annotations"]["suanpan.io/devices"] == "0,1,2,3"
    assert (await ext.bind({"PodName": "p"}))["Error"].startswith("ExtenderBindingArgs needs")


def test_errors_go_to_the_error_field() -> None:
    ext, _ = extender()
    assert "must be an object" in ext.filter({"NodeNames": ["b8"]})["Error"]
    bad = pod("p", flavor="acme/Warp9")
    result = ext.filter({"Pod": bad, "NodeNames": ["b8"]})
    assert "not in the accelerator catalog" in result["Error"] and result["NodeNames"] == []
    syncing = Extender(Cache(CATALOG), FakeAPI())
    assert syncing.filter({"Pod": pod("p", flavor=B3), "NodeNames": []})["Error"] == (
        "cache not synced yet"
    )


def test_pods_without_devices_pass_everywhere() -> None:
    ext, _ = extender()
    result = ext.filter({"Pod": pod("plain"), "NodeNames": ["b8", "a"]})
    assert result["NodeNames"] == ["b8", "a"] and not result["FailedNodes"]
    assert ext.prioritize({"Pod": pod("plain"), "NodeNames": ["a"]}) == [{"Host": "a", "Score": 0}]


def test_metrics_count_calls_rejections_and_errors() -> None:
    ext, _ = extender()
    ext.filter({"Pod": pod("p", flavor=B3, count=12), "NodeNames": ["b8", "b16", "a"]})
    ext.filter({"NodeNames": []})
    text = ext.metrics.render().decode()
    assert 'suanpan_extender_calls_total{verb="filter"} 2.0' in text
    assert 'suanpan_extender_errors_total{verb="filter"} 1.0' in text
    assert 'suanpan_extender_node_rejections_total{code="unresolvable"} 2.0' in text
    assert 'suanpan_extender_call_seconds_count{verb="filter"} 2.0' in text
    assert "suanpan_extender_cache_nodes 3.0" in text
