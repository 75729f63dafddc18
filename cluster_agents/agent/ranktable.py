"""Rank tables: the group file a collective library reads instead of a rendezvous (pure).

Ascend's HCCL (MindSpore's `rank table` start-up, torch_npu) reads `RANK_TABLE_FILE`, a JSON
file listing every server of the job with its devices and their global ranks. Nothing in it
is known before the pods are bound and have addresses, so the agent creates the placement's
rank-table ConfigMap with `{"status": "initializing"}` next to the pods, mounts it in each, and
rewrites it with `"status": "completed"` once every member is bound with an IP — as Ascend's
own ascend-operator does (its `rings-config-<job>` ConfigMap). The kubelet refreshes a mounted
ConfigMap in place, so a launcher waits for `completed` (docs/catalog.md gives the sources).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from federation.catalog import RankTableProfile

if TYPE_CHECKING:  # backend.py imports RankTableMount from here
    from cluster_agents.agent.backend import PodSpec, PodStatus

INITIALIZING = json.dumps({"status": "initializing"})


@dataclass(frozen=True)
class RankTableMount:
    """The rank table a pod mounts: its ConfigMap and the file's path in the container."""

    config_map: str
    profile: RankTableProfile

    @property
    def key(self) -> str:
        """The ConfigMap key, the file's name."""
        return self.profile.path.rsplit("/", 1)[1]

    @property
    def directory(self) -> str:
        """Where the ConfigMap is mounted (a whole directory, so the kubelet updates it)."""
        return self.profile.path.rsplit("/", 1)[0]


@dataclass(frozen=True)
class Member:
    """One pod of the group, in rank order: where it runs and the devices it was bound."""

    pod: str
    host_ip: str
    pod_ip: str
    devices: tuple[int, ...]
    device_ips: tuple[tuple[int, str], ...] = ()  # from the device plugin, where it gives them

    @property
    def ready(self) -> bool:
        """Whether everything the table says about this pod is known."""
        return bool(self.host_ip and self.pod_ip and self.devices)


def config_map_name(job: str, epoch: int) -> str:
    """The rank-table ConfigMap of a placement."""
    return f"sp-{job}-e{epoch}-rank-table"


def hccl_v1(members: Sequence[Member]) -> str:
    """HCCL's rank table version 1.0: one server entry per pod (`server_id` its node's IP,
    `container_ip` its own), each device with its physical id and its global `rank_id`, ranks
    counting the devices of the pods in order, `device_ip` where the device plugin gave it.
    Fields are strings, as HCCL expects."""
    servers = []
    rank = 0
    for member in members:
        devices = []
        addresses = dict(member.device_ips)
        for device in member.devices:
            entry = {"device_id": str(device), "rank_id": str(rank)}
            if device in addresses:
                entry["device_ip"] = addresses[device]
            devices.append(entry)
            rank += 1
        servers.append(
            {
                "server_id": member.host_ip,
                "container_ip": member.pod_ip,
                "pod_name": member.pod,
                "device": devices,
            }
        )
    table = {
        "status": "completed",
        "version": "1.0",
        "server_count": str(len(servers)),
        "server_list": servers,
    }
    return json.dumps(table, separators=(",", ":"))


def rank_table(profile: RankTableProfile, members: Sequence[Member]) -> str:
    """The file's content: initializing until every member is ready, then the table."""
    if not members or not all(m.ready for m in members):
        return INITIALIZING
    match profile.format:
        case "hccl-1.0":
            return hccl_v1(members)


def placement_tables(
    wanted: Iterable[PodSpec], pods: Iterable[PodStatus]
) -> dict[tuple[str, RankTableMount], str]:
    """Each wanted placement's rank table, (namespace, mount) -> content: its members are the
    pods that mount it, in render (rank) order, with what the cluster says about them."""
    status = {p.name: p for p in pods if not p.deleting}
    groups: defaultdict[tuple[str, RankTableMount], list[Member]] = defaultdict(list)
    for spec in wanted:
        if spec.rank_table is None:
            continue
        pod = status.get(spec.name)
        member = (
            Member(spec.name, pod.host_ip, pod.pod_ip, pod.devices, pod.device_ips)
            if pod is not None
            else Member(spec.name, "", "", ())
        )
        groups[(spec.namespace, spec.rank_table)].append(member)
    return {key: rank_table(key[1].profile, members) for key, members in groups.items()}


def device_addresses(annotation: str) -> tuple[tuple[int, str], ...]:
    """The (device id, IP) pairs of a device plugin's annotation as MindCluster writes it
    (`{"pod_name": ..., "server_id": ..., "devices": [{"device_id": "0", "device_ip": ...}]}`);
    () when it is not that shape."""
    try:
        devices = json.loads(annotation)["devices"]
        return tuple(sorted((int(d["device_id"]), str(d["device_ip"])) for d in devices))
    except (ValueError, TypeError, KeyError):
        return ()
