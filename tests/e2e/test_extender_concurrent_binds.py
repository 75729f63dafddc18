"""Concurrent binds against a real kube-apiserver never hand out a device twice.

The binds are sent straight to `suanpan-extender`'s /bind, all at once, as kube-scheduler's
binding goroutines would but with no scheduler in front: nothing but the extender's own
reservations stands between two pods and one device. Each seed draws a mix of whole-device
pods, HAMi-style shares and gangs that asks for about twice the devices of the cluster (two
H100 nodes of 8 GPUs, an 8-NPU and a 16-NPU Ascend node), picks a random node per bind, and
retries some binds (at once, and right after the first went through, before the watch shows
it), as kube-scheduler does after an HTTP timeout. The pods the apiserver then shows bound
are checked against the devices they were given.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from collections.abc import Iterator

import aiohttp
import pytest

from deploy.local.kube import JSON, KubeClient, wait_for
from federation.wire import annotations as wire
from tests.e2e.conftest import K8sEnvFactory
from tests.e2e.test_extender import (
    B3,
    B3_RESOURCE,
    BOX16,
    Stack,
    box16_stack,
    devices_of,
    pod_manifest,
)

pytestmark = pytest.mark.e2e

H100 = "nvidia/H100-80GB"
H100_MIB = 81559  # nvidia.com/gpu.memory of the profile's H100 nodes
NODES = {B3: ["bj-ascend-0", BOX16], H100: ["bj-h100-0", "bj-h100-1"]}
GANG_WAIT_S = 2.0
NOBODY = "suanpan-e2e-nobody"  # no scheduler serves it: only our binds bind these pods


@pytest.fixture(scope="module")
def stack(
    k8s_env_factory: K8sEnvFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The cluster with the Box16 node; gangs wait 2 s for their members."""
    yield from box16_stack(
        k8s_env_factory, tmp_path_factory.mktemp("binds"), "--gang-wait", str(GANG_WAIT_S)
    )


def draw_pods(rng: random.Random) -> list[JSON]:
    """About 48 NPUs and 32 GPUs' worth of pods: wholes, shares and gangs of 2-4."""
    pods: list[JSON] = []

    def add(name: str, count: int, flavor: str, request: dict[str, int] | None = None) -> JSON:
        resource = B3_RESOURCE if flavor == B3 else "nvidia.com/gpu"
        p = pod_manifest(name, count, resource=resource, flavor=flavor)
        p["spec"]["schedulerName"] = NOBODY
        if request is not None:
            p["metadata"]["annotations"][wire.DEVICE_REQUEST] = json.dumps(request)
        pods.append(p)
        return p

    for i in range(rng.randint(10, 14)):
        add(f"npu-{i}", rng.choice((1, 2, 4, 8)), B3)
    for g in range(rng.randint(1, 3)):
        size, count = rng.randint(2, 4), rng.choice((1, 2, 4))
        for m in range(size):
            notes = add(f"gang-{g}-{m}", count, B3)["metadata"]["annotations"]
            notes[wire.GANG], notes[wire.GANG_SIZE] = f"gang-{g}", str(size)
    for i in range(rng.randint(6, 10)):
        add(f"gpu-{i}", rng.choice((1, 2, 4)), H100)
    for i in range(rng.randint(12, 20)):
        share = {"count": 1, "milli": rng.choice((100, 250, 500)), "memoryMib": 0}
        share["memoryMib"] = rng.choice((8000, 20000, 40000))
        add(f"share-{i}", 1, H100, share)
    return pods


def flavor_of(pod: JSON) -> str:
    return str(pod["metadata"]["annotations"][wire.FLAVOR])


def check_no_device_twice(bound: list[JSON]) -> None:
    """Whole devices go to one pod; shares of a device fit it and never meet a whole pod."""
    whole: dict[tuple[str, int], str] = {}
    shares: dict[tuple[str, int], list[dict[str, int]]] = defaultdict(list)
    for p in bound:
        name, node = p["metadata"]["name"], p["spec"]["nodeName"]
        assert p["metadata"]["annotations"][wire.BOUND_NODE] == node, name
        assert node in NODES[flavor_of(p)], name
        request = json.loads(p["metadata"]["annotations"][wire.DEVICE_REQUEST])
        held = devices_of(p)
        assert len(held) == request["count"] == len(set(held)), name
        for device in held:
            key = (node, device)
            if "milli" in request:
                shares[key].append(request)
            else:
                assert key not in whole, f"{name} and {whole[key]} both hold {key}"
                whole[key] = name
    for key, on_device in shares.items():
        assert key not in whole, f"shares and {whole.get(key)} both on {key}"
        assert sum(s["milli"] for s in on_device) <= 1000, key
        assert sum(s["memoryMib"] for s in on_device) <= H100_MIB, key


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_concurrent_binds_never_hand_out_a_device_twice(
    kc: KubeClient, ns: str, stack: Stack, seed: int
) -> None:
    rng = random.Random(seed)
    pods = draw_pods(rng)
    created: list[JSON] = await asyncio.gather(
        *(kc.post(f"/api/v1/namespaces/{ns}/pods", p) for p in pods)
    )
    asked: dict[str, set[str]] = defaultdict(set)  # pod -> nodes its binds named
    answers: dict[str, list[str]] = defaultdict(list)  # pod -> Error of each bind

    async with aiohttp.ClientSession() as session:

        async def bind(p: JSON) -> None:
            meta = p["metadata"]
            node = rng.choice(NODES[flavor_of(p)])
            asked[meta["name"]].add(node)
            body = {
                "PodName": meta["name"],
                "PodNamespace": ns,
                "PodUID": meta["uid"],
                "Node": node,
            }
            async with session.post(stack.extender.url + "/bind", json=body) as resp:
                assert resp.status == 200
                answers[meta["name"]].append((await resp.json())["Error"])

        async def bind_and_retry(p: JSON) -> None:
            await bind(p)
            await bind(p)  # at once after the first answer: the watch may not show it yet

        calls = []
        for p in created:
            roll = rng.random()
            if roll < 0.15:
                calls += [bind(p), bind(p)]  # a retry while the first is in flight
            elif roll < 0.3 and wire.GANG not in p["metadata"]["annotations"]:
                calls.append(bind_and_retry(p))
            else:
                calls.append(bind(p))
        rng.shuffle(calls)
        await asyncio.gather(*calls)

    items = (await kc.get(f"/api/v1/namespaces/{ns}/pods"))["items"]
    bound = [p for p in items if p["spec"].get("nodeName")]
    for p in items:
        name = p["metadata"]["name"]
        ok = answers[name].count("")
        assert ok == (1 if p["spec"].get("nodeName") else 0), (name, answers[name])
        if ok:
            assert p["spec"]["nodeName"] in asked[name]
        else:
            assert wire.DEVICES not in p["metadata"]["annotations"], name
    check_no_device_twice(bound)
    gangs: dict[str, list[bool]] = defaultdict(list)
    for p in items:
        gang = p["metadata"]["annotations"].get(wire.GANG)
        if gang:
            gangs[gang].append(bool(p["spec"].get("nodeName")))
    assert all(all(v) or not any(v) for v in gangs.values()), gangs  # whole or not at all
    assert len(bound) >= 10  # the mix oversubscribes the cluster, but much of it fits

    async def released() -> bool:  # once the watch shows the bound pods, nothing stays held
        return (await stack.extender.metrics())["suanpan_extender_reservations{}"] == 0.0

    await wait_for("no reservation left", released, 10)


def test_the_draw_oversubscribes_every_vendor() -> None:
    """The seeds ask for more than the cluster holds, so binds really compete."""
    for seed in (1, 2, 3):
        pods = draw_pods(random.Random(seed))
        npus = sum(
            int(p["spec"]["containers"][0]["resources"]["requests"][B3_RESOURCE])
            for p in pods
            if flavor_of(p) == B3
        )
        requests = [
            json.loads(p["metadata"]["annotations"][wire.DEVICE_REQUEST])
            for p in pods
            if flavor_of(p) == H100
        ]
        gpus = sum(r.get("milli", 1000) * r["count"] for r in requests) / 1000
        assert npus > 24 and gpus > 16, (seed, npus, gpus)
