"""Each policy on pools small enough to work out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from federation.nodeplacement import (
    POLICY_NAMES,
    FragModel,
    NodeScores,
    PodRequest,
    PoolNode,
    TargetWorkload,
    TaskType,
    make_policy,
    normalized,
    select,
)
from federation.nodeplacement.fgd import cpu_short, host_sets, kept_whole, over_demanded
from tests.unit.nodeplacement.builders import cpu_only, gpu_node, gpus, pool_of

# Half the tasks want 0.5 GPU, half one whole GPU.
WORKLOAD = TargetWorkload((TaskType(1000, 500, 1), TaskType(1000, 1000, 1)), (0.5, 0.5))


def choose(policy: str, pool_nodes: list, req) -> tuple[int | None, tuple[int, ...]]:  # type: ignore[type-arg, no-untyped-def]
    pool = pool_of(*pool_nodes)
    scores = (
        make_policy(policy, WORKLOAD)
        .bind(pool, np.random.default_rng(0))
        .score(req, pool.feasible(req))
    )
    i = select(scores)
    return i, (() if i is None else scores.devices_for(pool, i, req))


def test_select_takes_the_earliest_best_and_none_when_nothing_fits() -> None:
    assert select(NodeScores(np.array([1.0, 3.0, 3.0]))) == 1
    assert select(NodeScores(np.array([-np.inf, -np.inf]))) is None
    assert normalized(NodeScores(np.array([10.0, 20.0, -np.inf]))).tolist() == [0.0, 100.0, 0.0]


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_every_policy_places_only_where_the_pod_fits(policy: str) -> None:
    nodes = [
        gpu_node("full", (1000, 1000)),
        gpu_node("half", (500, 1000)),
        gpu_node("free", (0, 0)),
    ]
    i, devs = choose(policy, nodes, gpus(milli=400))
    assert i in (1, 2)
    assert devs in ((0,), (1,)) if i == 2 else devs == (0,)
    assert choose(policy, nodes, gpus(count=4))[0] is None


@pytest.mark.parametrize("policy", ["packing", "bestfit", "clustering", "fgd", "suanpan"])
def test_packing_like_policies_fill_the_partly_used_gpu(policy: str) -> None:
    nodes = [gpu_node("free", (0, 0)), gpu_node("half", (500, 0))]
    assert choose(policy, nodes, gpus(milli=500)) == (1, (0,))


def test_dotprod_prefers_the_node_whose_free_capacity_aligns_least() -> None:
    nodes = [gpu_node("big", (0, 0, 0, 0), cpu=64_000), gpu_node("small", (0, 0), cpu=8000)]
    assert choose("dotprod", nodes, gpus())[0] == 1


def test_fgd_fills_a_fragment_rather_than_breaking_a_whole_gpu() -> None:
    # 0.7 free is already a fragment to whole-GPU tasks: filling it with a 0.5 share lowers
    # fragmentation (350 -> 200), while breaking the free GPU raises it (0 -> 250).
    nodes = [gpu_node("free", (0,)), gpu_node("seventy", (300,))]
    assert choose("fgd", nodes, gpus(milli=500))[0] == 1
    assert choose("suanpan", nodes, gpus(milli=500))[0] == 1


def test_fgd_scores_are_kube_scheduler_integers_and_suanpan_breaks_their_ties() -> None:
    nodes = [gpu_node("a", (0, 0)), gpu_node("b", (0, 0, 0, 0))]
    pool = pool_of(*nodes)
    req = cpu_only()
    fgd = (
        make_policy("fgd", WORKLOAD)
        .bind(pool, np.random.default_rng(0))
        .score(req, pool.feasible(req))
    )
    assert fgd.values.tolist() == [50.0, 50.0]
    mine = (
        make_policy("suanpan", WORKLOAD)
        .bind(pool, np.random.default_rng(0))
        .score(req, pool.feasible(req))
    )
    assert mine.values[0] != mine.values[1]


def test_random_is_seeded() -> None:
    nodes = [gpu_node(f"n{k}", (0,)) for k in range(20)]
    picks = {choose("random", nodes, gpus())[0] for _ in range(3)}
    assert len(picks) == 1


def test_unknown_policy_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown placement policy 'nope'"):
        make_policy("nope", WORKLOAD)


def test_suanpan_breaks_fgd_ties_away_from_stranding_gpus() -> None:
    # Both nodes keep the typical 1-GPU, 1-CPU task fitting (an FGD tie, so FGD takes the first);
    # on the first, the pod's 18 CPUs would leave 2 CPUs for 3 free GPUs.
    nodes = [gpu_node("lean", (0, 0, 0, 0), cpu=20_000), gpu_node("rich", (0, 0, 0, 0), cpu=64_000)]
    req = gpus(cpu=18_000)
    assert choose("fgd", nodes, req)[0] == 0
    assert choose("suanpan", nodes, req)[0] == 1


# A CPU-short workload: every other task is CPU-only and asks 24 CPUs; at full devices the
# 1-GPU tasks' pods and the CPU-only ones ask 26 CPUs per GPU, more than 32-CPU, 4-GPU nodes have.
CPU_HEAVY = TargetWorkload((TaskType(2000, 1000, 1), TaskType(24_000, 0, 0)), (0.5, 0.5))


def test_cpu_short_compares_the_workloads_cpu_at_full_devices_with_the_pools() -> None:
    pool = pool_of(gpu_node("a", (0, 0, 0, 0)), gpu_node("b", (0, 0, 0, 0)))
    assert cpu_short(FragModel(CPU_HEAVY, pool.model_names), pool)
    assert not cpu_short(FragModel(WORKLOAD, pool.model_names), pool)
    cpu_only_pool = pool_of(PoolNode("cpu", 64_000, 65_536))
    assert not cpu_short(FragModel(CPU_HEAVY, cpu_only_pool.model_names), cpu_only_pool)


def test_when_cpu_is_short_a_device_pod_keeps_cpu_the_workload_can_still_use() -> None:
    # Both nodes keep the 1-GPU task fitting (an FGD tie, so FGD takes the first). On "tight"
    # the pod's 2 CPUs would leave 23, less than the 24-CPU task needs: CPU no task can use.
    nodes = [gpu_node("tight", (0, 0, 0, 0), cpu=25_000), gpu_node("roomy", (0, 0, 0, 0))]
    pool = pool_of(*nodes)
    req = gpus(cpu=2000)
    for policy, chosen in (("fgd", 0), ("suanpan", 1)):
        scorer = make_policy(policy, CPU_HEAVY).bind(pool, np.random.default_rng(0))
        assert select(scorer.score(req, pool.feasible(req))) == chosen


# Most tasks are 8-GPU pods that fit any node; one in 200 asks 100 CPUs besides, which only the
# one 128-CPU node can host: at a full pool its device demand (1 % of 251 nodes' GPUs) is more
# than that node holds.
BIG_CPU = TaskType(100_000, 1000, 8)
HOST_SHORT = TargetWorkload((TaskType(1000, 1000, 8), BIG_CPU), (0.995, 0.005))


def _hosts_pool() -> list[PoolNode]:
    big = gpu_node("g3", (0,) * 8, cpu=128_000)
    return [big, *(gpu_node(f"g2-{i}", (0,) * 8, cpu=96_000) for i in range(250))]


def test_an_over_demanded_type_weighs_by_its_devices_per_pod() -> None:
    pool = pool_of(*_hosts_pool())

    def over(workload: TargetWorkload) -> TargetWorkload:
        return over_demanded(workload, host_sets(FragModel(workload, pool.model_names), pool))

    weighted = over(HOST_SHORT)
    assert weighted.types == HOST_SHORT.types
    # 8 devices per pod, and its one host is asked for 1.255 times over (10.04 of 8 devices)
    big = 0.005 * 8 * 1.255
    assert weighted.weights == pytest.approx((0.995 / (0.995 + big), big / (0.995 + big)))
    # with hosts enough (it asks 64 CPUs: every node), the workload is left as it is
    roomy = TargetWorkload((TaskType(1000, 1000, 8), TaskType(64_000, 1000, 8)), (0.995, 0.005))
    assert over(roomy) is roomy
    assert over(TargetWorkload((), ())) == TargetWorkload((), ())


def test_types_confined_to_hosts_they_over_demand_together_weigh_by_their_devices() -> None:
    # two 8-GPU types only the two 128-CPU nodes hold: each asks 8.064 of their 16 devices,
    # both together 16.128
    big = [gpu_node(f"g3-{i}", (0,) * 8, cpu=128_000) for i in range(2)]
    pool = pool_of(*big, *(gpu_node(f"g2-{i}", (0,) * 8, cpu=96_000) for i in range(250)))
    types = (TaskType(1000, 1000, 8), TaskType(100_000, 1000, 8), TaskType(120_000, 1000, 8))
    workload = TargetWorkload(types, (0.992, 0.004, 0.004))
    weighted = over_demanded(workload, host_sets(FragModel(workload, pool.model_names), pool))
    each = 0.004 * 8 * 16.128 / 16  # devices per pod, times over its hosts are asked for
    total = 0.992 + 2 * each
    assert weighted.weights == pytest.approx((0.992 / total, each / total, each / total))
    # one of them alone is within its hosts
    alone = TargetWorkload(types[:2], (0.996, 0.004))
    assert over_demanded(alone, host_sets(FragModel(alone, pool.model_names), pool)) is alone


def _fgd_and_suanpan(
    workload: TargetWorkload, nodes: list[PoolNode], req: PodRequest
) -> dict[str, int | None]:
    """The node FGD and Suanpan choose for `req` on an empty pool of `nodes`."""
    pool = pool_of(*nodes)
    chosen = {}
    for policy in ("fgd", "suanpan"):
        scorer = make_policy(policy, workload).bind(pool, np.random.default_rng(0))
        chosen[policy] = select(scorer.score(req, pool.feasible(req)))
    return chosen


def test_suanpan_keeps_the_few_hosts_of_an_over_demanded_type_whole() -> None:
    # a 4-GPU pod fits every node; only the first can ever hold the 8-GPU, 100-CPU pods
    chosen = _fgd_and_suanpan(HOST_SHORT, _hosts_pool(), gpus(count=4, cpu=8000))
    assert chosen["fgd"] == 0  # the rare type moves FGD's integer score by less than a point
    assert chosen["suanpan"] != 0


# One 128-CPU node of model G3 beside forty 96-CPU G2 ones: the 100-CPU 8-GPU pods ask about
# 12 devices of its 8; most pods are 1-GPU ones that accept only G2.
SCARCE_MODEL = TargetWorkload(
    (TaskType(8000, 1000, 8), BIG_CPU, TaskType(4000, 1000, 1, frozenset({"G2"}))),
    (0.185, 0.015, 0.8),
)


def _models_pool() -> list[PoolNode]:
    g3 = gpu_node("g3", (0,) * 8, model="G3", cpu=128_000)
    return [g3, *(gpu_node(f"g2-{i}", (0,) * 8, model="G2", cpu=96_000) for i in range(40))]


def test_on_the_hosts_of_an_over_demanded_set_only_the_types_that_can_use_them_count() -> None:
    pool = pool_of(*_models_pool())
    model = FragModel(SCARCE_MODEL, pool.model_names)
    sets = host_sets(model, pool)
    assert sets is not None and sets.scarce.tolist() == [True] + [False] * 40
    weights = kept_whole(model, sets)
    assert weights is not None
    # the G2-only type does not count on the G3 node; every other weight is the workload's
    assert weights[0].tolist() == [0.185, 0.015, 0.0]
    assert (weights[1:] == model.weight).all()
    # without the 100-CPU pods no set is over-demanded, and nothing changes
    roomy = FragModel(TargetWorkload(SCARCE_MODEL.types[::2], (0.2, 0.8)), pool.model_names)
    assert kept_whole(roomy, host_sets(roomy, pool)) is None


def test_suanpan_leaves_the_scarce_node_to_the_pods_only_it_holds() -> None:
    # FGD fills the G3 node with an 8-GPU pod a G2 node holds as well: it counts the G3
    # node's devices as a fragment for the G2-only pods, so filling them looks like a gain
    chosen = _fgd_and_suanpan(SCARCE_MODEL, _models_pool(), gpus(count=8, cpu=64_000))
    assert chosen["fgd"] == 0
    assert chosen["suanpan"] != 0
