"""The fail-fast verdict cache keys on what the core sees, not on a job's names, and a sample
of each node kind gives the whole fleet's verdict."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from api.feasibility import NO_PREEMPTION, emptied, kinds_of, replicas_at_most, sampled, shape_key
from federation.scheduling.cycle import schedule
from federation.scheduling.model import (
    AcceleratorRequest,
    Cluster,
    FlavorOption,
    Job,
    Snapshot,
    Task,
)
from tests.unit.scheduling.builders import ASCEND_910, H100, cluster, job, pool, queue


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


@st.composite
def _fleets_and_jobs(draw: st.DrawFn) -> tuple[tuple[Cluster, ...], Job]:
    """Clusters of many nodes of a few kinds, and a job that may or may not fit them."""
    clusters = []
    for c in range(draw(st.integers(1, 3))):
        nodes = []
        for k in range(draw(st.integers(1, 3))):
            model = draw(st.sampled_from([H100, ASCEND_910, None]))
            cpu = draw(st.sampled_from([8_000, 64_000]))
            nodes += pool(f"c{c}-k{k}", draw(st.integers(1, 12)), model, cpu=cpu)
        clusters.append(emptied(cluster(f"c{c}", nodes)))
    flavors = draw(st.lists(st.sampled_from([H100, ASCEND_910]), min_size=0, max_size=2))
    built = job(
        "j",
        *flavors,
        count=draw(st.sampled_from([1, 2, 8, 16])),
        replicas=draw(st.integers(1, 16)),
        gang=draw(st.booleans()),
        cpu=draw(st.sampled_from([1000, 32_000, 100_000])),
    )
    return tuple(clusters), built


@settings(max_examples=150, deadline=None, derandomize=True)
@given(_fleets_and_jobs())
def test_a_sample_of_each_node_kind_gives_the_whole_fleets_verdict(
    case: tuple[tuple[Cluster, ...], Job],
) -> None:
    clusters, built = case
    most = replicas_at_most(built)
    sample = tuple(sampled(c, kinds_of(c), most) for c in clusters)

    def verdict(fleet: tuple[Cluster, ...]) -> str | None:
        result = schedule(
            Snapshot(clusters=fleet, queues=(queue("q"),)), [built], now=0.0, config=NO_PREEMPTION
        )
        return result.rejected[0].message if result.rejected else None

    assert verdict(sample) == verdict(clusters)
    assert all(len(s.nodes) <= len(c.nodes) for s, c in zip(sample, clusters, strict=True))
