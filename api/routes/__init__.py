"""The REST API's operations, one module per resource."""

from api.registry import Api

API = Api()

from api.routes import agent, audit, clusters, jobs, logs, meta, tenancy, tokens, web  # noqa: E402

__all__ = [
    "API",
    "agent",
    "audit",
    "clusters",
    "jobs",
    "logs",
    "meta",
    "tenancy",
    "tokens",
    "web",
]
