"""The pure level-1 scheduling core: snapshot in, decisions out, no I/O."""

from federation.scheduling.devices import (
    DeviceConflict,
    DeviceRequest,
    Fit,
    FitCode,
    NodeDevices,
    allocate,
    fit,
    max_feasible_count,
    release,
)

__all__ = [
    "DeviceConflict",
    "DeviceRequest",
    "Fit",
    "FitCode",
    "NodeDevices",
    "allocate",
    "fit",
    "max_feasible_count",
    "release",
]
