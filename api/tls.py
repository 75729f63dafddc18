"""The hub's HTTPS: a TLS 1.2+ server context whose certificate and key are reloaded when
their files change, optional client certificates (mTLS), and the identity they carry."""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

log = logging.getLogger("suanpan.tls")
RELOAD_CHECK_S = 5.0


@dataclass
class ServerTLS:
    """The hub's server context over `cert`/`key`; with `client_ca`, client certificates
    signed by it are accepted (verified) and their identity is available to handlers."""

    cert: Path
    key: Path
    client_ca: Path | None = None
    context: ssl.SSLContext = field(init=False)
    _loaded: tuple[float, float] = field(init=False)

    def __post_init__(self) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.client_ca is not None:
            self.context.load_verify_locations(cafile=str(self.client_ca))
            self.context.verify_mode = ssl.CERT_OPTIONAL
        self._loaded = self._mtimes()
        self.context.load_cert_chain(self.cert, self.key)

    def _mtimes(self) -> tuple[float, float]:
        return self.cert.stat().st_mtime, self.key.stat().st_mtime

    def reload_if_changed(self) -> bool:
        """Load the certificate and key again if either file changed; new handshakes use them.
        A pair that does not load (half written, mismatched) keeps the one in use."""
        try:
            mtimes = self._mtimes()
            if mtimes == self._loaded:
                return False
            self.context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            log.warning("TLS certificate %s not reloaded: %s", self.cert, exc)
            return False
        self._loaded = mtimes
        log.warning("TLS certificate %s reloaded", self.cert)
        return True

    async def watch(self, stop: asyncio.Event, every_s: float = RELOAD_CHECK_S) -> None:
        """Reload on change, checking every `every_s` seconds, until `stop` is set."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), every_s)
            except TimeoutError:
                self.reload_if_changed()


def peer_names(request: web.BaseRequest) -> frozenset[str] | None:
    """The identities (subject CN and DNS SANs) of the request's verified client certificate,
    or None when the client presented none."""
    transport = request.transport
    cert = transport.get_extra_info("peercert") if transport is not None else None
    if not cert:
        return None
    names = {v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"}
    names |= {v for k, v in cert.get("subjectAltName", ()) if k == "DNS"}
    return frozenset(names)
