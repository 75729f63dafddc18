"""What a task asks for, in the units quotas are kept in (pure; shared by store and scheduler).

Resources: "cpu" in milli-cores, "memory" in MiB, and per accelerator flavor key
(e.g. "huawei/Ascend910B3") in milli-devices, so that shares and whole devices add up.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from federation.catalog.quantity import parse_quantity


def cpu_milli(value: str | int) -> int:
    """Milli-cores of a cpu quantity, rounded up."""
    return math.ceil(parse_quantity(str(value)) * 1000)


def memory_mib(value: str | int) -> int:
    """MiB of a memory quantity, rounded up."""
    return math.ceil(parse_quantity(str(value)) / 2**20)


def device_milli(accelerators: Mapping[str, Any], flavor_choice: Mapping[str, Any] | None) -> int:
    """Milli-devices one replica takes: a share of one device, or whole devices."""
    fraction = accelerators.get("fraction")
    if fraction is not None:
        return max(1, round(float(fraction) * 1000))
    count = (flavor_choice or {}).get("count") or accelerators.get("count", 1)
    return int(count) * 1000


def task_demand(task: Mapping[str, Any], replicas: int, flavor: str | None) -> Counter[str]:
    """Total demand of a task (JSON form of `federation.spec.Task`) placed on `flavor`."""
    resources = task.get("resources", {})
    demand: Counter[str] = Counter()
    demand["cpu"] = cpu_milli(resources.get("cpu", "1")) * replicas
    demand["memory"] = memory_mib(resources.get("memory", "1Gi")) * replicas
    accelerators = resources.get("accelerators")
    if accelerators and flavor:
        demand[flavor] = device_milli(accelerators, None) * replicas
    return demand
