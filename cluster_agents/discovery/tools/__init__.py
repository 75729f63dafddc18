"""One parser module per vendor tool; `PROBES` lists them in the order discovery runs them."""

from cluster_agents.discovery.devices import Probe
from cluster_agents.discovery.tools import (
    cnmon,
    efsmi,
    hy_smi,
    ixsmi,
    mthreads_gmi,
    mx_smi,
    npu_smi,
    nvidia_smi,
    xpu_smi,
)

PROBES: tuple[Probe, ...] = (
    nvidia_smi.PROBE,
    npu_smi.PROBE,
    cnmon.PROBE,
    hy_smi.PROBE,
    xpu_smi.PROBE,
    ixsmi.PROBE,
    mthreads_gmi.PROBE,
    mx_smi.PROBE,
    efsmi.PROBE,
)

__all__ = ["PROBES"]
