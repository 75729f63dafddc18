"""Node discovery: finds a node's accelerators with the vendor tools and labels the node."""

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.loop import DiscoveryLoop, discover
from cluster_agents.discovery.node_labels import compute_labels, labels_patch
from cluster_agents.discovery.runner import ToolFailed, ToolMissing, ToolRunner, run_tool
from cluster_agents.discovery.tools import PROBES

__all__ = [
    "PROBES",
    "DiscoveredDevice",
    "DiscoveryLoop",
    "Probe",
    "ToolFailed",
    "ToolMissing",
    "ToolRunner",
    "compute_labels",
    "discover",
    "labels_patch",
    "run_tool",
]
