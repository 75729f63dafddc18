"""Compiled jobs and assignments for tests, through the real manifest model and compiler."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from federation.catalog import Catalog
from federation.compiled import CompiledJob
from federation.compiler import compile_job
from federation.spec import JobManifest
from federation.wire.agent import Assignment, assigned_tasks


def manifest(tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A manifest (JSON form) with these tasks in queue "q"."""
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": "job"},
        "spec": {"queue": "q", **spec, "tasks": tasks},
    }


def compiled(catalog: Catalog, tasks: list[dict[str, Any]], **spec: Any) -> CompiledJob:
    """The compiled job of a manifest with these tasks."""
    return compile_job(catalog, JobManifest.model_validate(manifest(tasks, **spec)))


def assignment(
    catalog: Catalog,
    tasks: list[dict[str, Any]],
    flavors: Mapping[str, str | None],
    *,
    job: str | uuid.UUID | None = None,
    epoch: int = 1,
    **fields: Any,
) -> Assignment:
    """An Active assignment of a compiled job with the hub's chosen flavors."""
    form = compiled(catalog, tasks)
    values: dict[str, Any] = {
        "name": "job",
        "tenant": "t",
        "revision": 1,
        "state": "Active",
        "priority": 0,
        "priority_class": "normal",
        "preemptible": True,
        "gang": form.gang,
        **fields,
    }
    return Assignment(
        job=uuid.UUID(str(job)) if job else uuid.uuid4(),
        epoch=epoch,
        tasks=assigned_tasks(form, flavors),
        **values,
    )
