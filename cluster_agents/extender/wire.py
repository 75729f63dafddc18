"""kube-scheduler's extender wire format (`k8s.io/kube-scheduler/extender/v1`).

The Go structs carry no JSON tags, so keys are the Go field names (PascalCase) and Go decodes
them case-insensitively; we accept any case too. The embedded Pod and Nodes are ordinary
Kubernetes JSON (camelCase).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class WireError(ValueError):
    """A request body that is not what the protocol sends."""


def _fold(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise WireError("request body must be a JSON object")
    return {str(k).lower(): v for k, v in body.items()}


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    """Body of filter and prioritize: the pod, and the candidate nodes by name or in full."""

    pod: Mapping[str, Any]
    node_names: list[str]
    nodes: list[Mapping[str, Any]] | None  # full Node objects when not nodeCacheCapable


def parse_args(body: Any) -> ExtenderArgs:
    """Decode ExtenderArgs (`Pod`, `Nodes`, `NodeNames`)."""
    fields = _fold(body)
    pod = fields.get("pod")
    if not isinstance(pod, dict):
        raise WireError("ExtenderArgs.Pod must be an object")
    names = fields.get("nodenames")
    nodes = (fields.get("nodes") or {}).get("items") if fields.get("nodes") else None
    if names is None and nodes is not None:
        names = [(n.get("metadata") or {}).get("name", "") for n in nodes]
    if not isinstance(names, list) or not set(map(type, names)) <= {str}:
        raise WireError("ExtenderArgs needs NodeNames (a list of strings) or Nodes.items")
    return ExtenderArgs(pod, names, nodes)


@dataclass(frozen=True, slots=True)
class BindingArgs:
    """Body of bind: which pod goes to which node."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def parse_binding(body: Any) -> BindingArgs:
    """Decode ExtenderBindingArgs (`PodName`, `PodNamespace`, `PodUID`, `Node`)."""
    fields = _fold(body)
    values = [fields.get(k) for k in ("podname", "podnamespace", "poduid", "node")]
    strings = [v for v in values if isinstance(v, str) and v]
    if len(strings) != len(values):
        raise WireError("ExtenderBindingArgs needs PodName, PodNamespace, PodUID and Node")
    return BindingArgs(*strings)


def filter_result(
    args: ExtenderArgs | None,
    passed: list[str] | None = None,
    failed: Mapping[str, str] | None = None,
    unresolvable: Mapping[str, str] | None = None,
    error: str = "",
) -> dict[str, Any]:
    """ExtenderFilterResult, answering in the form the request came in (names or nodes)."""
    kept = passed or []
    full = args.nodes if args is not None else None
    nodes = None
    if full is not None:
        wanted = set(kept)
        nodes = {"items": [n for n in full if (n.get("metadata") or {}).get("name") in wanted]}
    return {
        "Nodes": nodes,
        "NodeNames": kept if full is None else None,
        "FailedNodes": dict(failed or {}),
        "FailedAndUnresolvableNodes": dict(unresolvable or {}),
        "Error": error,
    }


def priority_list(scores: Mapping[str, int]) -> list[dict[str, Any]]:
    """HostPriorityList: `[{"Host": name, "Score": 0..10}]`."""
    return [{"Host": host, "Score": score} for host, score in scores.items()]


def binding_result(error: str = "") -> dict[str, str]:
    """ExtenderBindingResult: `{"Error": ""}` on success."""
    return {"Error": error}
