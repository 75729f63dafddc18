"""A tiny openb-shaped trace written to disk."""

from __future__ import annotations

from pathlib import Path

import pytest

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,32000,131072,2,T4
n1,32000,131072,4,V100M16
n2,64000,262144,8,G2
n3,16000,65536,0,
"""

HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
PODS = (
    HEADER
    + """p0,4000,8192,1,1000,,LS,Running,0,100,0
p1,2000,4096,1,500,,BE,Running,10,50,10
p2,8000,16384,2,1000,,Burstable,Running,20,200,25
p3,1000,2048,0,0,,BE,Succeeded,30,40,30
p4,2000,4096,1,250,T4|V100M16,LS,Running,40,400,
p5,4000,8192,4,1000,,Guaranteed,Running,50,300,55
p6,2000,4096,1,750,,BE,Failed,60,90,60
"""
)


@pytest.fixture()
def trace_dir(tmp_path: Path) -> Path:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS)
    short = "\n".join(",".join(line.split(",")[:5]) for line in PODS.splitlines()) + "\n"
    (tmp_path / "openb_pod_list_multigpu20.csv").write_text(short)
    return tmp_path
