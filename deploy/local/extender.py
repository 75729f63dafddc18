"""A local cluster's `suanpan-extender` as a process, for the e2e tests, the bench and the
chaos suite (`deploy.local.clusters.up` points the cluster's kube-scheduler at its port)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

EXTENDER = Path(sys.executable).with_name("suanpan-extender")


@dataclass
class ExtenderProcess:
    """One cluster's extender process (stopped and started again at will)."""

    kubeconfig: str
    port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The urlPrefix kube-scheduler calls."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the process (output appended to `log`)."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    str(EXTENDER),
                    "--kubeconfig",
                    self.kubeconfig,
                    "--listen",
                    f"127.0.0.1:{self.port}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def stop(self) -> None:
        """Stop it (SIGTERM) and wait."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None
