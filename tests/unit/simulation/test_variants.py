"""The variant generator: seeded, and each knob moves only what it says."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from federation.simulation.trace import TraceNode, TracePod
from federation.simulation.variants import FAMILY, VariantSpec, generate

NODES = [
    TraceNode("a", 32_000, 131_072, 2, "T4"),
    TraceNode("b", 96_000, 393_216, 8, "G2"),
    TraceNode("c", 64_000, 262_144, 4, "V100M16"),
]
BASE = (
    [TracePod(f"s{k}", 4000, 8192, 1, (250, 500, 810)[k % 3], qos="LS") for k in range(30)]
    + [TracePod(f"w{k}", 8000, 16_384, 1, 1000, qos="BE") for k in range(60)]
    + [TracePod(f"m{k}", 16_000, 32_768, (2, 4, 8)[k % 3], 1000) for k in range(6)]
    + [TracePod(f"c{k}", 2000, 4096, 0, 0) for k in range(4)]
)


def test_the_same_spec_gives_the_same_pods_and_another_seed_other_pods() -> None:
    spec = VariantSpec("x", cpu_scale=1.5, share=0.3, multi=0.2, spec=0.3)
    assert generate(BASE, NODES, spec) == generate(list(reversed(BASE)), NODES, spec)
    assert generate(BASE, NODES, spec) != generate(BASE, NODES, VariantSpec("x", share=0.3, seed=2))


def test_an_empty_spec_is_the_base_trace() -> None:
    assert generate(BASE, NODES, VariantSpec("same")) == sorted(BASE, key=lambda p: p.name)


def test_cpu_scale_scales_gpu_pods_within_the_largest_host() -> None:
    pods = {p.name: p for p in generate(BASE, NODES, VariantSpec("cpu", cpu_scale=20))}
    assert (pods["w0"].cpu_milli, pods["w0"].memory_mib) == (96_000, 327_680)
    assert pods["c0"].cpu_milli == 2000  # CPU-only pods are left alone
    assert pods["m2"].cpu_milli == 96_000  # an 8-GPU pod fits only the G2 node


def test_cpu_only_pods_are_dropped_or_cloned_to_the_fraction() -> None:
    more = generate(BASE, NODES, VariantSpec("more", cpu_only=0.5))
    fewer = generate(BASE, NODES, VariantSpec("fewer", cpu_only=0.02))
    for pods, cpu_only in ((more, 96), (fewer, 2)):
        assert sum(1 for p in pods if not p.num_gpu) == cpu_only
        assert sum(1 for p in pods if p.num_gpu) == 96
        assert len({p.name for p in pods}) == len(pods)


def test_share_and_multi_draw_from_the_base_distributions() -> None:
    pods = generate(BASE, NODES, VariantSpec("mix", share=0.5, multi=0.5))
    whole = [p for p in pods if p.name.startswith("w")]
    shares = [p for p in whole if p.is_share]
    multis = [p for p in whole if p.num_gpu > 1]
    assert len(shares) == 30 and {p.gpu_milli for p in shares} <= {250, 500, 810}
    assert len(multis) == 15 and {p.num_gpu for p in multis} <= {2, 4, 8}
    assert all(p.cpu_milli == min(8000 * p.num_gpu, 96_000) for p in multis)
    assert Counter(p.qos for p in pods) == Counter(p.qos for p in BASE)


@settings(max_examples=30, deadline=None)
@given(
    cpu=st.floats(0.5, 3.0),
    share=st.floats(0, 1),
    multi=st.floats(0, 1),
    spec=st.floats(0, 1),
    seed=st.integers(0, 1000),
)
def test_every_variant_keeps_the_pods_and_fits_some_node(
    cpu: float, share: float, multi: float, spec: float, seed: int
) -> None:
    pods = generate(BASE, NODES, VariantSpec("h", None, cpu, share, multi, spec, seed))
    assert sorted(p.name for p in pods) == sorted(p.name for p in BASE)
    models = {n.model for n in NODES}
    for p in pods:
        hosts = [
            n
            for n in NODES
            if n.gpu >= p.num_gpu
            and (not p.gpu_spec or n.model in p.gpu_spec)
            and n.cpu_milli >= p.cpu_milli
            and n.memory_mib >= p.memory_mib
        ]
        assert hosts, p
        assert set(p.gpu_spec) <= models and len(p.gpu_spec) <= 2


def test_the_family_names_are_distinct() -> None:
    assert len({s.name for s in FAMILY}) == len(FAMILY)
