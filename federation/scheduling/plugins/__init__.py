"""The built-in plugins, one module each, and the registry that names them."""

from federation.scheduling.framework import Registry
from federation.scheduling.plugins.balance import Balance
from federation.scheduling.plugins.constraints import Constraints
from federation.scheduling.plugins.cost import Cost
from federation.scheduling.plugins.flavor_availability import FlavorAvailability
from federation.scheduling.plugins.gang_fit import GangFit
from federation.scheduling.plugins.growth_room import GrowthRoom
from federation.scheduling.plugins.live_load import LiveLoad
from federation.scheduling.plugins.locality import Locality
from federation.scheduling.plugins.packing import Packing
from federation.scheduling.plugins.performance import Performance
from federation.scheduling.plugins.quota import Quota
from federation.scheduling.plugins.readiness import Ready
from federation.scheduling.plugins.retry import Retry

DEFAULT_REGISTRY = Registry(
    cluster_filters={"ready": Ready, "constraints": Constraints},
    assignment_filters={
        "flavor_availability": FlavorAvailability,
        "quota": Quota,
        "gang_fit": GangFit,
    },
    scores={
        "packing": Packing,
        "performance": Performance,
        "balance": Balance,
        "locality": Locality,
        "cost": Cost,
        "retry": Retry,
        "live_load": LiveLoad,
        "growth_room": GrowthRoom,
    },
)

__all__ = [
    "DEFAULT_REGISTRY",
    "Balance",
    "Constraints",
    "Cost",
    "FlavorAvailability",
    "GangFit",
    "GrowthRoom",
    "LiveLoad",
    "Locality",
    "Packing",
    "Performance",
    "Quota",
    "Ready",
    "Retry",
]
