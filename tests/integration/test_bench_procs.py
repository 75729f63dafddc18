"""The benchmarks' process meter: CPU time and time waiting for a CPU, read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.procs import CpuMeter, waiting_seconds

pytestmark = pytest.mark.integration


def test_a_spinning_process_sharing_one_cpu_with_another_waits_for_it() -> None:
    cpu = str(sorted(os.sched_getaffinity(0))[0])
    hold = "import time\nend = time.process_time() + 5\nwhile time.process_time() < end: pass\n"
    spinners = [
        subprocess.Popen(["taskset", "-c", cpu, sys.executable, "-c", hold]) for _ in range(2)
    ]
    try:
        meter = CpuMeter(first=lambda: [spinners[0].pid])
        meter.start()
        subprocess.run(["sleep", "1.5"], check=True)
        used = meter.stop()["first"]
        waited = meter.waited["first"]
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    # two runnable processes on one CPU: each runs about half the time and waits the rest
    assert 0.3 < used < 1.2
    assert 0.3 < waited < 1.2
    assert waiting_seconds(spinners[0].pid) == 0.0  # gone


def test_an_unknown_process_waited_for_nothing() -> None:
    assert waiting_seconds(2**22 + 12345) == 0.0
