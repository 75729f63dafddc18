"""Quota accounting with cohort borrowing (Kueue semantics) and dominant resource shares.

A queue may use up to `nominal` of a resource on its own; in a cohort it may use more, up to
`nominal + borrowing_limit`, as long as the cohort as a whole stays within the sum of its
members' nominal quotas. A queue within its nominal can still be blocked when others borrowed
its unused quota: it gets it back by preemption (reclaim).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from federation.scheduling.model import COMPUTE, CPU, MEMORY, Assignment, Job, Queue
from federation.scheduling.status import SUCCESS, Status, unresolvable, unschedulable


def demand(job: Job, assignment: Assignment) -> dict[str, int]:
    """What `job` charges against quota when its tasks run with `assignment`."""
    total: dict[str, int] = {CPU: 0, MEMORY: 0}
    for task, option in zip(job.tasks, assignment, strict=True):
        total[CPU] += task.replicas * task.cpu_milli
        total[MEMORY] += task.replicas * task.memory_mib
        if option is not None:
            milli = task.replicas * option.milli_devices
            total[option.flavor] = total.get(option.flavor, 0) + milli
            total[COMPUTE] = total.get(COMPUTE, 0) + round(milli * option.speed)
    return total


def _unit(resource: str) -> str:
    return {CPU: "m CPU", MEMORY: " MiB", COMPUTE: " compute units"}.get(resource, f"m {resource}")


class QuotaLedger:
    """Per-queue and per-cohort usage of a cycle; `charge` with sign -1 undoes a charge.

    A cohort counts only the usage of resources its member queues govern (a resource a queue
    does not list is neither lent nor borrowed by it).
    """

    def __init__(self, queues: Iterable[Queue]) -> None:
        self.queues: dict[str, Queue] = {q.name: q for q in queues}
        self.usage: dict[str, dict[str, int]] = {name: {} for name in self.queues}
        self.cohort_usage: dict[str, dict[str, int]] = {}
        self.cohort_nominal: dict[str, dict[str, int]] = {}
        self._versions = itertools.count(1)
        self.version = 0  # a new, never repeated value with every charge
        for q in self.queues.values():
            if q.cohort:
                self.cohort_usage.setdefault(q.cohort, {})
                nominal = self.cohort_nominal.setdefault(q.cohort, {})
                for resource, quota in q.quota.items():
                    nominal[resource] = nominal.get(resource, 0) + quota.nominal

    def charge(self, queue: str, amounts: Mapping[str, int], sign: int = 1) -> None:
        """Add (sign 1) or remove (sign -1) `amounts` to a queue's and its cohort's usage."""
        self.version = next(self._versions)
        used = self.usage.setdefault(queue, {})
        q = self.queues.get(queue)
        cohort = self.cohort_usage.get(q.cohort) if q is not None and q.cohort else None
        for resource, amount in amounts.items():
            used[resource] = used.get(resource, 0) + sign * amount
            if cohort is not None and q is not None and resource in q.quota:
                cohort[resource] = cohort.get(resource, 0) + sign * amount

    def check(self, queue: str, amounts: Mapping[str, int]) -> Status:
        """Whether `amounts` more fit the queue's quota now (unresolvable: never, even unused)."""
        q = self.queues[queue]
        used = self.usage[queue]
        for resource, amount in amounts.items():
            quota = q.quota.get(resource)
            if quota is None or amount == 0:
                continue
            unit = _unit(resource)
            if not q.cohort:
                if amount > quota.nominal:
                    return unresolvable(
                        f"queue {queue}: needs {amount}{unit}, nominal quota {quota.nominal}"
                    )
                if used.get(resource, 0) + amount > quota.nominal:
                    return unschedulable(
                        f"queue {queue}: needs {amount}{unit}, "
                        f"uses {used.get(resource, 0)} of nominal {quota.nominal}"
                    )
                continue
            limit = self.limit(queue, resource)
            pool = self.cohort_nominal[q.cohort].get(resource, 0)
            if amount > min(limit, pool):
                return unresolvable(
                    f"queue {queue}: needs {amount}{unit}, "
                    f"nominal {quota.nominal} + borrowing up to {min(limit, pool)}"
                )
            if used.get(resource, 0) + amount > limit:
                return unschedulable(
                    f"queue {queue}: needs {amount}{unit}, uses {used.get(resource, 0)}, "
                    f"borrowing limit reached at {limit}"
                )
            cohort_used = self.cohort_usage[q.cohort].get(resource, 0)
            if cohort_used + amount > pool:
                return unschedulable(
                    f"cohort {q.cohort}: needs {amount}{unit}, "
                    f"{pool - cohort_used} of {pool} unused"
                )
        return SUCCESS

    def limit(self, queue: str, resource: str) -> float:
        """Most of `resource` the queue may use: nominal plus borrowing limit (inf: no limit)."""
        q = self.queues[queue]
        quota = q.quota.get(resource)
        if quota is None:
            return float("inf")
        if not q.cohort:
            return quota.nominal
        if quota.borrowing_limit is None:
            return float("inf")
        return quota.nominal + quota.borrowing_limit

    def borrows(self, queue: str, resource: str) -> bool:
        """Whether the queue uses more of `resource` than its nominal quota."""
        quota = self.queues[queue].quota.get(resource)
        return quota is not None and self.usage[queue].get(resource, 0) > quota.nominal

    def within_nominal(self, queue: str, amounts: Mapping[str, int]) -> bool:
        """Whether the queue stays within its nominal quota after using `amounts` more."""
        q = self.queues[queue]
        used = self.usage[queue]
        return all(
            used.get(r, 0) + a <= q.quota[r].nominal for r, a in amounts.items() if r in q.quota
        )

    def pool(self, queue: str) -> tuple[str, str]:
        """Whose quota the queue draws on: its cohort's, else its own."""
        q = self.queues.get(queue)
        return ("cohort", q.cohort) if q is not None and q.cohort else ("queue", queue)

    def dominant_share(self, queue: str) -> float:
        """The queue's largest share of any governed resource of its cohort (or of its own
        nominal without a cohort), divided by its weight; lower is served first."""
        q = self.queues[queue]
        used = self.usage[queue]
        share = 0.0
        for resource, quota in q.quota.items():
            pool = self.cohort_nominal[q.cohort][resource] if q.cohort else quota.nominal
            if pool > 0:
                share = max(share, used.get(resource, 0) / pool)
        return share / q.weight if q.weight > 0 else float("inf")
