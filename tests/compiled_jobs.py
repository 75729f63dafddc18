"""Compiled jobs and assignments for tests, through the real manifest model and compiler."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from federation.catalog import Catalog
from federation.compiled import CompiledJob
from federation.compiler import compile_job, compile_service, shard_form
from federation.spec import JobManifest, ServiceManifest
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


def service_assignment(
    catalog: Catalog,
    server: dict[str, Any],
    *,
    held: int = 1,
    generation: int = 1,
    job: str | uuid.UUID | None = None,
    epoch: int = 1,
    **spec: Any,
) -> Assignment:
    """An Active assignment of a shard (holding `held` replicas) of service "web" with this
    server task (`spec`: the rest of the service's spec, ports default to http 8080)."""
    manifest = ServiceManifest.model_validate(
        {
            "apiVersion": "suanpan.io/v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {
                "queue": "q",
                "ports": [{"name": "http", "port": 8080}],
                **spec,
                "server": server,
            },
        }
    )
    form = shard_form(compile_service(catalog, manifest, generation), ("c",))
    assert form.service is not None
    return Assignment(
        job=uuid.UUID(str(job)) if job else uuid.uuid4(),
        name="web-0",
        tenant="t",
        epoch=epoch,
        revision=generation,
        state="Active",
        priority=0,
        priority_class="normal",
        preemptible=True,
        gang=form.gang,
        tasks=assigned_tasks(form, {}, {form.tasks[0].name: held}),
        service=form.service,
    )
