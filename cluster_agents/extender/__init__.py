"""The cluster-level scheduler extender: kube-scheduler calls it to filter and score nodes and to
bind pods to exact devices (DESIGN.md, level 2)."""

from cluster_agents.extender.binder import APIError, Binder, BindOutcome, PodAPI
from cluster_agents.extender.cache import Cache, Reservation
from cluster_agents.extender.config import managed_resources, render, scheduler_config
from cluster_agents.extender.decide import FilterOutcome, choose, filter_nodes
from cluster_agents.extender.metrics import Metrics
from cluster_agents.extender.scoring import POLICIES, Prioritizer
from cluster_agents.extender.server import make_app
from cluster_agents.extender.service import Extender

__all__ = [
    "POLICIES",
    "APIError",
    "BindOutcome",
    "Binder",
    "Cache",
    "Extender",
    "FilterOutcome",
    "Metrics",
    "PodAPI",
    "Prioritizer",
    "Reservation",
    "choose",
    "filter_nodes",
    "make_app",
    "managed_resources",
    "render",
    "scheduler_config",
]
