"""Node profiles: which fake (kwok) nodes each local cluster gets."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEFAULT_PROFILE = Path(__file__).parent / "profiles" / "mixed.yaml"
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
CLUSTER_LABEL = "suanpan.io/cluster"
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ProfileError(ValueError):
    """The profile file is malformed."""


@dataclass(frozen=True)
class NodeSpec:
    """One fake node: name, labels, annotations, capacity (= allocatable)."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    capacity: Mapping[str, str]

    def manifest(self, cluster: str) -> dict[str, Any]:
        """The v1 Node object to create (with status) for `cluster`."""
        labels = {
            **self.labels,
            "kubernetes.io/hostname": self.name,
            "type": "kwok",
            CLUSTER_LABEL: cluster,
        }
        annotations = {**self.annotations, KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1]}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": {},
            "status": {"capacity": dict(self.capacity), "allocatable": dict(self.capacity)},
        }


@dataclass(frozen=True)
class ClusterProfile:
    """The nodes of one cluster."""

    name: str
    nodes: tuple[NodeSpec, ...]


@dataclass(frozen=True)
class Profile:
    """A parsed profile file."""

    path: Path
    clusters: tuple[ClusterProfile, ...]


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProfileError(f"{where}: expected a mapping, got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}


_HAMI_FIELDS = {"annotation", "id", "devices", "count", "devmem", "devcore", "type"}


def hami_register(node: str, spec: Mapping[str, Any], where: str) -> dict[str, str]:
    """The register annotation HAMi's device plugin writes on `node`: JSON, one entry per
    physical device (`id` with `{uuid}` filled in, unique per node and index), fields with
    zero values left out as its `omitempty` encoder does."""
    if not isinstance(spec, dict) or set(spec) != _HAMI_FIELDS:
        raise ProfileError(f"{where}.hami: needs exactly {', '.join(sorted(_HAMI_FIELDS))}")
    devices = []
    for index in range(int(spec["devices"])):
        ident = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{node}.{index}.suanpan.local"))
        entry = {
            "id": str(spec["id"]).replace("{uuid}", ident),
            "index": index,
            "count": int(spec["count"]),
            "devmem": int(spec["devmem"]),
            "devcore": int(spec["devcore"]),
            "type": str(spec["type"]),
            "mode": "hami-core",
            "health": True,
        }
        devices.append({k: v for k, v in entry.items() if v})
    return {str(spec["annotation"]): json.dumps(devices, separators=(",", ":"))}


def load_profile(path: Path = DEFAULT_PROFILE) -> Profile:
    """Parse and validate a profile YAML file."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ProfileError(f"cannot read profile {path}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("clusters"), list):
        raise ProfileError(f"{path}: needs a top-level `clusters` list")
    defaults = doc.get("defaults") or {}
    base_cap = _str_map(defaults.get("capacity"), "defaults.capacity")
    base_labels = _str_map(defaults.get("labels"), "defaults.labels")
    clusters: list[ClusterProfile] = []
    for i, raw in enumerate(doc["clusters"]):
        where = f"{path}: clusters[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("nodes"), list):
            raise ProfileError(f"{where}: needs `name` and a `nodes` list")
        name = str(raw.get("name", ""))
        if not _DNS1123.match(name) or any(c.name == name for c in clusters):
            raise ProfileError(f"{where}: name {name!r} is not a unique DNS-1123 label")
        nodes: list[NodeSpec] = []
        for j, rn in enumerate(raw["nodes"]):
            nwhere = f"{where}.nodes[{j}]"
            if not isinstance(rn, dict):
                raise ProfileError(f"{nwhere}: expected a mapping")
            nname = str(rn.get("name", ""))
            if not _DNS1123.match(nname) or any(n.name == nname for n in nodes):
                raise ProfileError(f"{nwhere}: name {nname!r} is not a unique DNS-1123 label")
            annotations = _str_map(rn.get("annotations"), f"{nwhere}.annotations")
            if "hami" in rn:
                annotations |= hami_register(nname, rn["hami"], nwhere)
            nodes.append(
                NodeSpec(
                    name=nname,
                    labels={**base_labels, **_str_map(rn.get("labels"), f"{nwhere}.labels")},
                    annotations=annotations,
                    capacity={**base_cap, **_str_map(rn.get("capacity"), f"{nwhere}.capacity")},
                )
            )
        clusters.append(ClusterProfile(name, tuple(nodes)))
    if not clusters:
        raise ProfileError(f"{path}: no clusters")
    return Profile(path, tuple(clusters))
