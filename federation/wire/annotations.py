"""Labels and annotations Suanpan puts on the pods it creates (a contract between the agent,
the scheduler extender and the hub).

The agent writes the request side when it renders a pod; the extender writes the exact devices
at bind; both read them back to rebuild device occupancy after a restart (no other state).
"""

from __future__ import annotations

PREFIX = "suanpan.io/"

# labels (selectable)
JOB_LABEL = PREFIX + "job"  # job id
TASK_LABEL = PREFIX + "task"  # task name
REPLICA_LABEL = PREFIX + "replica"  # replica index, "0".."n-1"
EPOCH_LABEL = PREFIX + "epoch"  # placement epoch (fencing token)
ATTEMPT_LABEL = PREFIX + "attempt"  # the replica's run in its placement, "1".. (retries in place)
# a service's pods: the template generation they run (a rolling update replaces older ones)
GENERATION_LABEL = PREFIX + "generation"
MANAGED_LABEL = PREFIX + "managed"  # "true" on every pod Suanpan created
TENANT_LABEL = PREFIX + "tenant"  # tenant name, on its namespaces in the member clusters

# annotations written by the agent at pod creation
FLAVOR = PREFIX + "flavor"  # catalog key, e.g. "huawei/Ascend910B3"
DEVICE_REQUEST = PREFIX + "device-request"  # JSON {"count": int, "milli": int, "memoryMib": int}
HINT_DEVICES = PREFIX + "hint-devices"  # hub's choice "node:0,1,2,3", preferred at bind if free
GANG = PREFIX + "gang"  # gang of the pod: "<job id>-e<epoch>" (every member binds or none)
GANG_SIZE = PREFIX + "gang-size"  # members of the gang that bind through the extender
ACCELERATOR_NODES = PREFIX + "accelerator-nodes"  # task annotation "allow": CPU-only pods may
# land on accelerator nodes (otherwise a required node affinity keeps them off)
RUN_SECONDS = PREFIX + "run-seconds"  # simulated workloads: run this long, then succeed
FAIL_REASON = PREFIX + "fail-reason"  # simulated workloads: fail with this reason
EXIT_CODE = PREFIX + "exit-code"  # ... and this exit code (default 137 for OOMKilled, else 1)
# simulated workloads: after SIGTERM, take this long to checkpoint and exit (at most the grace)
STOP_SECONDS = PREFIX + "stop-seconds"

# annotations written by the extender at bind
DEVICES = PREFIX + "devices"  # exact device indices on the bound node, e.g. "0,1,2,3"
BOUND_NODE = PREFIX + "bound-node"  # node chosen by the extender (equals spec.nodeName)

GANG_GATE = PREFIX + "gang"  # scheduling gate of gang members until every member exists

SCHEDULER_NAME = "suanpan-scheduler"  # profile name of the kube-scheduler using our extender
