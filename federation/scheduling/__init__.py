"""The pure level-1 scheduling core: snapshot in, decisions out, no I/O.

`schedule(snapshot, pending, now=..., config=...)` is the entry point; `devices.fit` is the one
device-fit function shared with the cluster extender and the simulator.
"""

from federation.scheduling.cycle import DEFAULT_CONFIG, FLEET, schedule
from federation.scheduling.decisions import CycleResult, Pending, Placed, Preempted, Rejected
from federation.scheduling.devices import (
    DeviceConflict,
    DeviceRequest,
    Fit,
    FitCode,
    NodeDevices,
    allocate,
    fit,
    max_feasible_count,
    release,
)
from federation.scheduling.flavors import FitCheck, FlavorAssigner, Verdict, assignments
from federation.scheduling.framework import (
    AssignmentFilter,
    Candidate,
    ClusterFilter,
    Estimate,
    JobContext,
    Profile,
    Registry,
    SchedulerConfig,
    ScorePlugin,
)
from federation.scheduling.model import (
    COMPUTE,
    CPU,
    MEMORY,
    AcceleratorRequest,
    Assignment,
    Cluster,
    Constraints,
    FlavorOption,
    Job,
    Node,
    Placement,
    Queue,
    Quota,
    ReplicaPlacement,
    Snapshot,
    Taint,
    Task,
)
from federation.scheduling.ordering import PendingOrder, ordered
from federation.scheduling.plugins import DEFAULT_REGISTRY
from federation.scheduling.preemption import Preemption, find_preemption
from federation.scheduling.quota import QuotaLedger, demand
from federation.scheduling.state import State
from federation.scheduling.status import Code, Status

__all__ = [
    "COMPUTE",
    "CPU",
    "DEFAULT_CONFIG",
    "DEFAULT_REGISTRY",
    "FLEET",
    "MEMORY",
    "AcceleratorRequest",
    "Assignment",
    "AssignmentFilter",
    "Candidate",
    "Cluster",
    "ClusterFilter",
    "Code",
    "Constraints",
    "CycleResult",
    "DeviceConflict",
    "DeviceRequest",
    "Estimate",
    "Fit",
    "FitCheck",
    "FitCode",
    "FlavorAssigner",
    "FlavorOption",
    "Job",
    "JobContext",
    "Node",
    "NodeDevices",
    "Pending",
    "PendingOrder",
    "Placed",
    "Placement",
    "Preempted",
    "Preemption",
    "Profile",
    "Queue",
    "Quota",
    "QuotaLedger",
    "Registry",
    "Rejected",
    "ReplicaPlacement",
    "SchedulerConfig",
    "ScorePlugin",
    "Snapshot",
    "State",
    "Status",
    "Taint",
    "Task",
    "Verdict",
    "allocate",
    "assignments",
    "demand",
    "find_preemption",
    "fit",
    "max_feasible_count",
    "ordered",
    "release",
    "schedule",
]
