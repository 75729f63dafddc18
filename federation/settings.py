"""Hub settings from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from federation.hubconfig import CONFIG_ENV


def default_data_dir() -> Path:
    """`$SUANPAN_DATA_DIR`, else `suanpan` in the user's data directory (XDG)."""
    if explicit := os.environ.get("SUANPAN_DATA_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "suanpan"


@dataclass(frozen=True)
class HubSettings:
    """Where the hub listens and which database it uses."""

    database_url: str | None
    admin_token: str | None
    host: str = "127.0.0.1"
    port: int = 8080
    controllers: bool = True  # compete for leadership and run the scheduling loop
    config_path: Path | None = None  # the operators' scheduling configuration file
    data_dir: Path = field(default_factory=default_data_dir)  # embedded PostgreSQL's home
    tls_cert: Path | None = None  # HTTPS with this certificate (chain) and key
    tls_key: Path | None = None
    client_ca: Path | None = None  # accept client certificates signed by this CA (mTLS)

    @classmethod
    def from_env(cls) -> HubSettings:
        """Read `DATABASE_URL`, `SUANPAN_ADMIN_TOKEN`, `SUANPAN_HOST`, `SUANPAN_PORT`,
        `SUANPAN_CONFIG`, `SUANPAN_DATA_DIR`, `SUANPAN_TLS_CERT`, `SUANPAN_TLS_KEY`,
        `SUANPAN_CLIENT_CA`."""
        config = os.environ.get(CONFIG_ENV)
        return cls(
            database_url=os.environ.get("DATABASE_URL") or None,
            admin_token=os.environ.get("SUANPAN_ADMIN_TOKEN") or None,
            host=os.environ.get("SUANPAN_HOST", "127.0.0.1"),
            port=int(os.environ.get("SUANPAN_PORT", "8080")),
            config_path=Path(config) if config else None,
            tls_cert=_path("SUANPAN_TLS_CERT"),
            tls_key=_path("SUANPAN_TLS_KEY"),
            client_ca=_path("SUANPAN_CLIENT_CA"),
        )


def _path(env: str) -> Path | None:
    value = os.environ.get(env)
    return Path(value) if value else None
