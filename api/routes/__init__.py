"""The REST API's operations, one module per resource."""

from api.registry import Api

API = Api()

from api.routes import (  # noqa: E402
    agent,
    audit,
    clusters,
    jobs,
    logs,
    meta,
    registration,
    services,
    tenancy,
    tokens,
    web,
)

__all__ = [
    "API",
    "agent",
    "audit",
    "clusters",
    "jobs",
    "logs",
    "meta",
    "registration",
    "services",
    "tenancy",
    "tokens",
    "web",
]
