"""Seeded variants of an openb pod list, to test placement policies beyond the published files.

The authors' twelve variants each move one knob of the default trace (CPU-only pods, shared-GPU
pods, multi-GPU pods, model-constrained pods). Held-back mixes move them differently, so a policy
tuned to the published files can still lose. `generate` derives a new pod list from a base trace
with a `VariantSpec`; every knob draws from the base trace's own distributions, so the variants
stay in the trace's family:

- `cpu_only`: CPU-only pods make up that fraction of the pods: random ones are dropped, or
  clones drawn with replacement from them are added (named `<pod>-x<k>`), as the authors'
  cpu050-cpu200 files keep the GPU pods and change only the CPU-only ones;
- `cpu_scale`: every GPU pod asks that many times its CPU (and memory), capped by the largest
  node that has enough devices for it (a heavier CPU mix strands GPUs on CPU-full nodes);
- `share`: that fraction of the whole single-GPU pods become shares, their per-GPU milli drawn
  from the base trace's shares;
- `multi`: that fraction of the whole single-GPU pods become multi-GPU pods, their count drawn
  from the base trace's multi-GPU pods, CPU and memory scaled by the count;
- `spec`: that fraction of the GPU pods accept only some models: one or two of the models whose
  nodes could hold the pod, drawn in proportion to each model's devices.

Transformations apply in that order, each to pods chosen by one generator seeded with `seed`;
pods keep their names, QoS and times. `FAMILY` is the set the benchmark evaluates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from federation.scheduling.devices import WHOLE
from federation.simulation.trace import TraceNode, TracePod


@dataclass(frozen=True, slots=True)
class VariantSpec:
    """How a variant departs from its base trace (see the module docstring)."""

    name: str
    cpu_only: float | None = None
    cpu_scale: float = 1.0
    share: float = 0.0
    multi: float = 0.0
    spec: float = 0.0
    seed: int = 1


FAMILY = (
    VariantSpec("gen-cpu110", cpu_scale=1.1),
    VariantSpec("gen-cpu125", cpu_scale=1.25),
    VariantSpec("gen-cpuonly30", cpu_only=0.3),
    VariantSpec("gen-share50", share=0.5),
    VariantSpec("gen-multi25", multi=0.25),
    VariantSpec("gen-spec30", spec=0.3),
    VariantSpec("gen-mix", cpu_only=0.2, cpu_scale=1.1, share=0.3, multi=0.1, spec=0.15, seed=2),
)


def _whole_single(p: TracePod) -> bool:
    return p.num_gpu == 1 and p.gpu_milli == WHOLE


def _pick(rng: np.random.Generator, among: Sequence[int], fraction: float) -> list[int]:
    """`fraction` (rounded) of the indices `among`, drawn without replacement, in order."""
    n = round(fraction * len(among))
    return sorted(among[int(i)] for i in rng.choice(len(among), size=n, replace=False)) if n else []


def generate(
    base: Sequence[TracePod], nodes: Sequence[TraceNode], spec: VariantSpec
) -> list[TracePod]:
    """The pod list `spec` derives from `base` for a fleet of `nodes` (deterministic)."""
    rng = np.random.default_rng(spec.seed)
    pods = sorted(base, key=lambda p: p.name)
    gpu_nodes = [n for n in nodes if n.gpu > 0]
    if spec.cpu_only is not None:
        pods = _with_cpu_only(rng, pods, spec.cpu_only)
    if spec.cpu_scale != 1.0:
        pods = [_scaled(p, spec.cpu_scale, gpu_nodes) if p.num_gpu else p for p in pods]
    shares = [p.gpu_milli for p in pods if p.is_share]
    multis = [p.num_gpu for p in pods if p.num_gpu > 1]
    for knob, draws in ((spec.share, shares), (spec.multi, multis)):
        if not knob or not draws:
            continue
        singles = [k for k, p in enumerate(pods) if _whole_single(p)]
        for k in _pick(rng, singles, knob):
            p = pods[k]
            value = int(draws[int(rng.integers(len(draws)))])
            pods[k] = (
                replace(p, gpu_milli=value)
                if draws is shares
                else _scaled(replace(p, num_gpu=value), value, gpu_nodes)
            )
    gpu_pods = [k for k, p in enumerate(pods) if p.num_gpu]
    for k in _pick(rng, gpu_pods, spec.spec):
        models, weights = _model_weights([n for n in gpu_nodes if _holds(n, pods[k])])
        size = min(int(rng.integers(1, 3)), len(models))
        chosen = rng.choice(len(models), size=size, replace=False, p=weights)
        pods[k] = replace(pods[k], gpu_spec=tuple(sorted(models[int(c)] for c in chosen)))
    return pods


def _with_cpu_only(
    rng: np.random.Generator, pods: Sequence[TracePod], fraction: float
) -> list[TracePod]:
    """`pods` with CPU-only pods dropped or cloned until they are `fraction` of all."""
    gpu = [p for p in pods if p.num_gpu]
    cpu = [p for p in pods if not p.num_gpu]
    want = round(fraction / (1.0 - fraction) * len(gpu))
    if want <= len(cpu):
        kept = [cpu[k] for k in _pick(rng, range(len(cpu)), want / len(cpu) if cpu else 0.0)]
    else:
        draws = rng.integers(len(cpu), size=want - len(cpu))
        kept = cpu + [
            replace(cpu[int(d)], name=f"{cpu[int(d)].name}-x{k}") for k, d in enumerate(draws)
        ]
    return sorted(gpu + kept, key=lambda p: p.name)


def _holds(n: TraceNode, p: TracePod) -> bool:
    """Whether node `n` alone could run pod `p` (model constraints aside)."""
    return n.gpu >= p.num_gpu and n.cpu_milli >= p.cpu_milli and n.memory_mib >= p.memory_mib


def _scaled(p: TracePod, factor: float, nodes: Sequence[TraceNode]) -> TracePod:
    """`p` asking `factor` times its CPU and memory, capped by the largest node (most CPU,
    then memory) with enough devices for it."""
    host = max((n for n in nodes if n.gpu >= p.num_gpu), key=lambda n: (n.cpu_milli, n.memory_mib))
    return replace(
        p,
        cpu_milli=min(round(p.cpu_milli * factor), host.cpu_milli),
        memory_mib=min(round(p.memory_mib * factor), host.memory_mib),
    )


def _model_weights(nodes: Sequence[TraceNode]) -> tuple[list[str], list[float]]:
    """The fleet's models and each one's share of its devices."""
    devices: dict[str, int] = {}
    for n in nodes:
        devices[n.model] = devices.get(n.model, 0) + n.gpu
    models = sorted(devices)
    total = sum(devices.values())
    return models, [devices[m] / total for m in models]
