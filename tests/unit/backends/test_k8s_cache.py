"""The backend's cache: what changes wake the agent, and derived views stay right."""

from __future__ import annotations

from cluster_agents.backends.k8s_cache import ClusterCache
from tests.unit.backends.k8s_objects import ASCEND, CATALOG, NAMESPACE, node, pod, suanpan_pod


def cache_with_node() -> ClusterCache:
    cache = ClusterCache(CATALOG, NAMESPACE)
    cache.node_store.replace([node("n1", {ASCEND: "8"})])
    cache.pod_store.replace([])
    cache.changed.clear()
    return cache


def woke(cache: ClusterCache) -> bool:
    was = cache.changed.is_set()
    cache.changed.clear()
    return was


def test_node_changes_wake_the_agent_but_heartbeats_do_not() -> None:
    cache = cache_with_node()
    beat = node("n1", {ASCEND: "8"})
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-30T01:05:00Z"
    cache.node_store.upsert(beat)
    assert not woke(cache)
    cache.node_store.upsert(node("n1", {ASCEND: "8"}, ready="False"))
    assert woke(cache)
    assert [n.ready for n in cache.nodes()] == [False]
    cache.node_store.upsert(node("n2"))
    assert woke(cache)
    cache.node_store.remove(node("n1"))
    assert woke(cache)
    assert [n.name for n in cache.nodes()] == ["n2"]


def test_foreign_pods_wake_the_agent_only_when_their_use_changes() -> None:
    cache = cache_with_node()
    cache.pod_store.upsert(pod("web", "", {ASCEND: "2"}, phase="Pending"))
    assert not woke(cache)  # unbound: uses nothing yet
    cache.pod_store.upsert(pod("web", "n1", {ASCEND: "2"}, phase="Pending"))
    assert woke(cache)
    assert [d.used_milli for d in cache.nodes()[0].devices][:3] == [1000, 1000, 0]
    cache.pod_store.upsert(pod("web", "n1", {ASCEND: "2"}, phase="Running"))
    assert not woke(cache)
    assert cache.pods() == []  # not Suanpan's
    cache.pod_store.upsert(pod("web", "n1", {ASCEND: "2"}, phase="Succeeded"))
    assert woke(cache)
    assert cache.nodes()[0].used_pods == 0


def test_suanpan_pods_of_the_agents_namespaces_are_reported() -> None:
    cache = cache_with_node()
    cache.pod_store.upsert(suanpan_pod("sp-a-0", status={"phase": "Pending"}))
    assert woke(cache)
    tenant = suanpan_pod("sp-t-0", status={"phase": "Pending"})
    tenant["metadata"]["namespace"] = f"{NAMESPACE}-acme"
    cache.pod_store.upsert(tenant)
    for other in ("other-agent", f"{NAMESPACE}x", f"x-{NAMESPACE}-acme"):
        elsewhere = suanpan_pod(f"sp-{other}-0", status={"phase": "Pending"})
        elsewhere["metadata"]["namespace"] = other
        cache.pod_store.upsert(elsewhere)
    assert [p.name for p in cache.pods()] == ["sp-a-0", "sp-t-0"]
    assert cache.managed("sp-t-0").namespace == f"{NAMESPACE}-acme"  # type: ignore[union-attr]
    cache.pod_store.remove(tenant)
    assert [p.name for p in cache.pods()] == ["sp-a-0"]
    woke(cache)
    cache.pod_store.upsert(suanpan_pod("sp-a-0", "n1", devices="4", status={"phase": "Running"}))
    assert woke(cache)
    assert [(p.phase, p.node) for p in cache.pods()] == [("Running", "n1")]
    assert cache.nodes()[0].devices[4].used_milli == 1000
    assert cache.managed("sp-a-0") is not None
    assert [p.name for p in cache.placement_pods(cache.pods()[0].job, 3)] == ["sp-a-0"]


def test_pods_of_a_deleted_node_are_lost_and_freed_with_it() -> None:
    cache = cache_with_node()
    cache.pod_store.upsert(suanpan_pod("sp-a-0", "n1", devices="0", status={"phase": "Running"}))
    cache.node_store.remove(node("n1"))
    assert [(p.phase, p.reason) for p in cache.pods()] == [("Failed", "NodeLost")]
    cache.node_store.upsert(node("n1", {ASCEND: "8"}))  # the node comes back
    assert [(p.phase, p.reason) for p in cache.pods()] == [("Running", "")]


def test_write_through_of_created_pods_never_overrides_the_watch() -> None:
    cache = cache_with_node()
    cache.upsert_created(suanpan_pod("sp-a-0", status={"phase": "Pending"}))
    assert cache.has_pod(NAMESPACE, "sp-a-0")
    cache.pod_store.upsert(suanpan_pod("sp-a-0", "n1", status={"phase": "Running"}))
    cache.upsert_created(suanpan_pod("sp-a-0", status={"phase": "Pending"}))  # a late answer
    assert [p.phase for p in cache.pods()] == ["Running"]
    cache.pod_store.remove(suanpan_pod("sp-a-0"))
    cache.upsert_created(suanpan_pod("sp-a-0", status={"phase": "Pending"}))  # already gone
    assert not cache.has_pod(NAMESPACE, "sp-a-0")


def test_relist_replaces_everything() -> None:
    cache = cache_with_node()
    cache.pod_store.upsert(pod("old", "n1", {ASCEND: "8"}))
    assert cache.nodes()[0].used_pods == 1
    cache.pod_store.replace([pod("new", "n1", {ASCEND: "1"})])
    assert woke(cache)
    n = cache.nodes()[0]
    assert (n.used_pods, sum(d.used_milli for d in n.devices)) == (1, 1000)
