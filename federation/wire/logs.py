"""The log relay's part of the agent protocol: what the hub asks an agent to stream."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field

from federation.k8s_names import DnsLabel
from federation.validation import INT32_MAX

MAX_LOG_BYTES = 16 << 20  # the most one log request streams


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class LogRequest(_Msg):
    """Stream the logs of one container of one replica of a placement up to the hub."""

    id: uuid.UUID
    job: uuid.UUID
    epoch: int
    task: DnsLabel
    replica: int = Field(ge=0, le=INT32_MAX)
    container: str = ""  # "": the pod's only (or first) container
    follow: bool = False
    tail: int | None = Field(default=None, ge=0, le=INT32_MAX)  # last lines only
    limit_bytes: int = Field(alias="limitBytes", ge=1, le=MAX_LOG_BYTES)


class LogRequestBatch(_Msg):
    """Log requests the hub has not handed out before."""

    items: list[LogRequest]


class LogFailure(_Msg):
    """Why the agent cannot stream a request's logs (no such pod, container or log)."""

    message: str = Field(max_length=1024)
