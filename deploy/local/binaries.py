"""Locate (building if needed) the Kubernetes/kwok/etcd binaries via deploy/local/build.sh."""

from __future__ import annotations

import subprocess
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


def ensure_binaries(bin_dir: Path | None = None) -> Path:
    """Return a directory holding all BINARIES.

    With `bin_dir`, only check it.  Otherwise run build.sh, which returns at once
    when its cache is warm and builds (minutes) when cold.  Never skips silently.
    """
    if bin_dir is None:
        if not BUILD_SCRIPT.is_file():
            raise BuildError(f"{BUILD_SCRIPT} is missing (the package is not run from a checkout)")
        proc = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=None, text=True, check=False
        )
        if proc.returncode != 0:
            raise BuildError(f"{BUILD_SCRIPT} failed with exit code {proc.returncode}")
        lines = proc.stdout.strip().splitlines()
        if not lines:
            raise BuildError(f"{BUILD_SCRIPT} printed no binary directory")
        bin_dir = Path(lines[-1])
    bin_dir = bin_dir.resolve()
    missing = [b for b in BINARIES if not (bin_dir / b).is_file()]
    if missing:
        raise BuildError(f"{bin_dir} lacks {', '.join(missing)}")
    return bin_dir
