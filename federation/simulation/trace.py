"""openb trace loader: the node and pod CSVs of Alibaba's cluster-trace-gpu-v2023.

Columns are described in `shared/data/openb/README.md`. The loader keeps the trace's own units
(milli-CPU, MiB, milli-GPU per GPU) and turns `gpu_spec` (`|`-separated models) into a tuple.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TraceNode:
    """One node of the trace: CPU, memory and `gpu` devices of one `model` (empty: CPU-only)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpu: int
    model: str


@dataclass(frozen=True, slots=True)
class TracePod:
    """One pod of the trace. `gpu_milli` is per GPU; `num_gpu == 0` means a CPU-only pod."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()
    qos: str = ""
    creation_time: int | None = None
    deletion_time: int | None = None
    scheduled_time: int | None = None

    @property
    def total_gpu_milli(self) -> int:
        """GPU demand in milli-GPUs (0 for CPU-only pods)."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        """Whether the pod takes a fraction of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < 1000


def _int_or_none(text: str | None) -> int | None:
    return None if text is None or text == "" else int(text)


def load_nodes(path: Path) -> list[TraceNode]:
    """Read a node list CSV (`sn,cpu_milli,memory_mib,gpu,model`)."""
    with path.open(newline="") as f:
        return [
            TraceNode(
                name=row["sn"],
                cpu_milli=int(row["cpu_milli"]),
                memory_mib=int(row["memory_mib"]),
                gpu=int(row["gpu"]),
                model=row["model"] if int(row["gpu"]) > 0 else "",
            )
            for row in csv.DictReader(f)
        ]


def load_pods(path: Path) -> list[TracePod]:
    """Read a pod list CSV; the time and QoS columns are optional (the multigpu files lack them)."""
    with path.open(newline="") as f:
        pods = []
        for row in csv.DictReader(f):
            num_gpu = int(row["num_gpu"])
            spec = row.get("gpu_spec") or ""
            pods.append(
                TracePod(
                    name=row["name"],
                    cpu_milli=int(row["cpu_milli"]),
                    memory_mib=int(row["memory_mib"]),
                    num_gpu=num_gpu,
                    gpu_milli=int(row["gpu_milli"]) if num_gpu > 0 else 0,
                    gpu_spec=tuple(m for m in spec.split("|") if m),
                    qos=row.get("qos") or "",
                    creation_time=_int_or_none(row.get("creation_time")),
                    deletion_time=_int_or_none(row.get("deletion_time")),
                    scheduled_time=_int_or_none(row.get("scheduled_time")),
                )
            )
        return pods
