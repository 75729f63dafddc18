"""The fail-fast verdict cache keys on what the core sees, not on a job's names."""

from dataclasses import replace

from api.feasibility import shape_key
from federation.scheduling.model import AcceleratorRequest, FlavorOption, Job, Task


def _job(job_id: str, task_name: str, replicas: int = 2) -> Job:
    accel = AcceleratorRequest(options=(FlavorOption(flavor="nvidia-a100", count=8),))
    task = Task(name=task_name, replicas=replicas, cpu_milli=4000, accelerators=accel)
    return Job(id=job_id, queue="q", tasks=(task,), created_at=float(len(job_id)))


def test_jobs_differing_only_in_names_share_a_verdict() -> None:
    assert shape_key(_job("a", "train")) == shape_key(_job("bbbb", "worker"))


def test_anything_the_core_reads_changes_the_key() -> None:
    base = _job("a", "train")
    assert shape_key(base) != shape_key(_job("a", "train", replicas=3))
    assert shape_key(base) != shape_key(replace(base, queue="other"))
    assert shape_key(base) != shape_key(replace(base, gang=False))
