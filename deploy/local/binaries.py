"""Locate (building if needed) the Kubernetes/kwok/etcd binaries via deploy/local/build.sh."""

from __future__ import annotations

import subprocess
import sys
from collections import deque
from pathlib import Path

BUILD_SCRIPT = Path(__file__).resolve().parent / "build.sh"
BINARIES = (
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "kubectl",
    "kwok",
    "etcd",
)


class BuildError(RuntimeError):
    """The binaries could not be built."""


def run_build_script(script: Path, *args: str) -> Path:
    """Run a build script, echoing its stderr live; its last stdout line is what it built."""
    if not script.is_file():
        raise BuildError(f"{script} is missing (the package is not run from a checkout)")
    tail: deque[str] = deque(maxlen=30)
    with subprocess.Popen(
        ["bash", str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            tail.append(line)
        out = proc.stdout.read().strip().splitlines()
    if proc.returncode != 0 or not out:
        raise BuildError(
            f"{script} failed (exit code {proc.returncode}):\n{''.join(tail).rstrip()}"
        )
    return Path(out[-1])


def ensure_binaries(bin_dir: Path | None = None) -> Path:
    """Return a directory holding all BINARIES.

    With `bin_dir`, only check it.  Otherwise run build.sh, which returns at once
    when its cache is warm and builds (minutes) when cold.  Never skips silently.
    """
    if bin_dir is None:
        bin_dir = run_build_script(BUILD_SCRIPT)
    bin_dir = bin_dir.resolve()
    missing = [b for b in BINARIES if not (bin_dir / b).is_file()]
    if missing:
        raise BuildError(f"{bin_dir} lacks {', '.join(missing)}")
    return bin_dir
