"""Live load from the devices' exporters: shares avoid busy devices, jobs avoid hot clusters."""

from __future__ import annotations

from dataclasses import replace

from federation.scheduling.cycle import schedule
from federation.scheduling.devices import DeviceRequest, NodeDevices, fit
from federation.scheduling.model import Cluster

from .builders import H100, cluster, devices_of, job, node, snapshot
from .rules import HAMI_SHARING


def _busy(load: tuple[float | None, ...], used: tuple[int, ...] = (0, 0, 0, 0)) -> NodeDevices:
    nd = replace(devices_of(H100, size=4), sharing=HAMI_SHARING, load=load)
    return replace(nd, used_milli=used)


def test_a_share_goes_to_the_least_busy_device_whatever_allocation_says() -> None:
    # device 0 holds the most shares (pack would choose it) but its exporter reads 95 %
    nd = _busy((95.0, 20.0, 3.0, None), used=(500, 300, 300, 0))
    assert fit(nd, DeviceRequest(milli=250)).devices == (2,)
    # loads within one band keep the pack order
    nd = _busy((4.0, 1.0, 3.0, 8.0), used=(500, 300, 300, 0))
    assert fit(nd, DeviceRequest(milli=250)).devices == (0,)


def test_without_telemetry_shares_pack_as_before() -> None:
    nd = _busy((None,) * 4, used=(0, 300, 600, 0))
    assert fit(nd, DeviceRequest(milli=250)).devices == (2,)
    assert fit(nd, DeviceRequest(milli=250), prefer="spread").devices == (0,)


def test_whole_devices_ignore_load() -> None:
    nd = _busy((90.0, 0.0, 0.0, 0.0))
    assert fit(nd, DeviceRequest(count=1)).devices == (0,)


def _cluster(name: str, load: float | None) -> Cluster:
    loads = (load,) * 8
    return cluster(name, [node(f"{name}-0", devices=replace(devices_of(H100), load=loads))])


def test_the_job_goes_to_the_cluster_whose_devices_are_less_busy() -> None:
    for hot, cool in (("a", "b"), ("b", "a")):
        snap = snapshot([_cluster(hot, 90.0), _cluster(cool, 10.0)])
        result = schedule(snap, [job("j", H100)], now=0)
        placed = result.placed[0]
        assert placed.placement.cluster == cool
        assert placed.scores["live_load"] == 90.0


def test_a_cluster_without_readings_scores_as_the_others_do_on_average() -> None:
    snap = snapshot([_cluster("a", 40.0), _cluster("b", None), _cluster("c", 80.0)])
    result = schedule(snap, [job("j", H100)], now=0)
    assert result.placed[0].placement.cluster == "a"
    # alone with the cool one, the silent cluster scores as it does (60): other scores decide
    snap = snapshot([_cluster("b", None), _cluster("a", 40.0)])
    assert schedule(snap, [job("j", H100)], now=0).placed[0].scores["live_load"] == 60.0
