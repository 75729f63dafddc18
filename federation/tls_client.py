"""The client side of TLS to the hub, shared by the CLI and the agent: verify the hub against
a CA bundle (TLS 1.2 or later) and, for mTLS, present a client certificate."""

from __future__ import annotations

import ssl
from pathlib import Path


def client_context(
    ca: Path | None = None, cert: Path | None = None, key: Path | None = None
) -> ssl.SSLContext:
    """A context verifying the hub against `ca` (default: the system's CAs), presenting `cert`
    and `key` when given."""
    context = ssl.create_default_context(cafile=str(ca) if ca is not None else None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context
