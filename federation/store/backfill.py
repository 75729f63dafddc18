"""Compile jobs stored before compiled forms existed (schema 0002), or in an older compiled
form (version 1: no pod template), once, after migrating.

A job whose manifest no longer validates or compiles against the catalog is failed with the
reason; a terminal job is left as it is (nothing reads its compiled form).
"""

from __future__ import annotations

import sqlalchemy as sa
from pydantic import ValidationError

from federation.catalog import Catalog
from federation.compiled import CompiledJob
from federation.compiler import CompileError, compile_job
from federation.spec import JobManifest
from federation.store.database import Database
from federation.store.lifecycle import TERMINAL_JOB_STATES, move_job, release_placements
from federation.store.tables import jobs


async def compile_uncompiled(url: str, catalog: Catalog) -> tuple[int, int]:
    """Compile every non-terminal job that lacks a current compiled form; return (compiled,
    failed)."""
    current = str(CompiledJob.model_fields["version"].default)
    db = Database(url)
    compiled = failed = 0
    try:
        async with db.transaction() as conn:
            rows = await conn.execute(
                sa.select(jobs.c.id, jobs.c.spec)
                .where(
                    sa.or_(
                        jobs.c.compiled.is_(None),
                        jobs.c.compiled["version"].astext.is_distinct_from(current),
                    ),
                    jobs.c.state.not_in(TERMINAL_JOB_STATES),
                )
                .with_for_update()
            )
            for job_id, spec in rows.all():
                try:
                    form = compile_job(catalog, JobManifest.model_validate(spec))
                except (ValidationError, CompileError) as exc:
                    await release_placements(conn, job_id)
                    await move_job(
                        conn, job_id, "Failed", reason="Uncompilable", message=str(exc)[:2000]
                    )
                    failed += 1
                    continue
                await conn.execute(
                    sa.update(jobs)
                    .where(jobs.c.id == job_id)
                    .values(compiled=form.model_dump(mode="json", by_alias=True))
                )
                compiled += 1
    finally:
        await db.close()
    return compiled, failed
