"""Status codes every filter returns: whether a "no" could become a "yes" by preemption."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Code(enum.IntEnum):
    """SUCCESS; UNSCHEDULABLE: preemption (or waiting) may help; UNRESOLVABLE: never."""

    SUCCESS = 0
    UNSCHEDULABLE = 1
    UNRESOLVABLE = 2


@dataclass(frozen=True, slots=True)
class Status:
    """A filter's answer with a reason that carries numbers, and the plugin that gave it."""

    code: Code = Code.SUCCESS
    reason: str = ""
    plugin: str = ""

    @property
    def ok(self) -> bool:
        """True on success."""
        return self.code is Code.SUCCESS

    def by(self, plugin: str) -> Status:
        """This status attributed to `plugin` (kept if already attributed)."""
        if self.plugin:
            return self
        return Status(self.code, self.reason, plugin)

    def __str__(self) -> str:
        return self.reason or self.code.name.lower()


SUCCESS = Status()


def unschedulable(reason: str) -> Status:
    """A "no" that freeing capacity (preemption, jobs finishing) may turn into a "yes"."""
    return Status(Code.UNSCHEDULABLE, reason)


def unresolvable(reason: str) -> Status:
    """A "no" that holds even if the cluster were empty."""
    return Status(Code.UNRESOLVABLE, reason)
