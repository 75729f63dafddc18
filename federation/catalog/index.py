"""`Catalog`: the loaded, immutable set of accelerator models and the look-ups on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType

from federation.catalog import labels as discovery
from federation.catalog.types import (
    AcceleratorModel,
    TelemetryProfile,
    Vendor,
    normalize_product,
)

MAX_MATCHES = 4096


@dataclass(frozen=True)
class Catalog:
    """Accelerator models by key `<vendor>/<model>` (see `federation.catalog.load_catalog`)."""

    models: Mapping[str, AcceleratorModel]
    reference_fp16_tflops: float = 312.0
    _folded: Mapping[str, AcceleratorModel] = field(init=False, repr=False, compare=False)
    _managed: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _users: Mapping[str, tuple[tuple[AcceleratorModel, ...], tuple[AcceleratorModel, ...]]] = field(
        init=False, repr=False, compare=False
    )
    # match() by spec: every submission compiles its flavors through it (a user's specs are
    # few; the table stops growing at MAX_MATCHES)
    _matches: dict[str, tuple[AcceleratorModel, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        models = dict(self.models)
        for key, model in models.items():
            if key != model.key:
                raise ValueError(f"catalog entry {key!r} holds model {model.key!r}")
        object.__setattr__(self, "models", MappingProxyType(models))
        folded = {key.lower(): model for key, model in models.items()}
        object.__setattr__(self, "_folded", MappingProxyType(folded))
        names: set[str] = set()
        for model in models.values():
            s = model.sharing
            names.update(model.resources)
            names.update(r for r in (s.share_resource, s.memory_resource, s.core_resource) if r)
        object.__setattr__(self, "_managed", tuple(sorted(names)))
        users = {}
        for name in names:
            whole = tuple(m for m in models.values() if name in m.resources)
            shares = tuple(
                m
                for m in models.values()
                if m.sharing.enabled and m.sharing.share_resource == name and m not in whole
            )
            users[name] = (whole, shares)
        object.__setattr__(self, "_users", MappingProxyType(users))

    def get(self, key: str) -> AcceleratorModel | None:
        """The model with this key (case-insensitive), or None."""
        return self.models.get(key) or self._folded.get(key.lower())

    def match(self, spec: str) -> list[AcceleratorModel]:
        """Models a user-facing spec names, sorted by key; case-insensitive.

        `spec` is `[<vendor>/]<name>` where both parts may be shell globs and `<name>` matches
        a model name or one of its aliases: "huawei/Ascend910B3", "huawei/*", "nvidia/H100*",
        "V100M32" (an alias, any vendor).
        """
        found = self._matches.get(spec)
        if found is None:
            vendor, sep, name = spec.strip().lower().rpartition("/")
            vendor = vendor if sep else "*"
            found = tuple(
                model
                for key, model in sorted(self.models.items())
                if name
                and fnmatchcase(model.vendor.value, vendor)
                and any(fnmatchcase(n.lower(), name) for n in (model.model, *model.aliases))
            )
            if len(self._matches) < MAX_MATCHES:
                self._matches[spec] = found
        return list(found)

    def speed(self, key: str) -> float:
        """Normalized speed of one device of the model `key`; KeyError if unknown."""
        model = self.get(key)
        if model is None:
            raise KeyError(f"unknown accelerator model {key!r}")
        return model.speed

    def managed_resources(self) -> tuple[str, ...]:
        """Every extended resource the catalog knows: whole-device and sharing ones, sorted.

        Computed once when the catalog is built: the resolver asks for it on every resource
        it cannot attribute (`resolve_node`, `pod_device_usage`).
        """
        return self._managed

    def device_address_annotations(self) -> frozenset[str]:
        """The pod annotations in which device plugins give the bound devices' addresses (the
        rank-table profiles' `device_annotation`)."""
        return frozenset(
            table.device_annotation
            for model in self.models.values()
            if (table := model.runtime.rank_table) is not None and table.device_annotation
        )

    def telemetry_profiles(self) -> dict[Vendor, TelemetryProfile]:
        """Per vendor, what its exporter publishes (vendors whose models give one; the first
        model's when an override gives one model another)."""
        found: dict[Vendor, TelemetryProfile] = {}
        for _, model in sorted(self.models.items()):
            if model.telemetry is not None:
                found.setdefault(model.vendor, model.telemetry)
        return found

    def resource_users(
        self, name: str
    ) -> tuple[tuple[AcceleratorModel, ...], tuple[AcceleratorModel, ...]]:
        """Models counting whole devices with the resource `name`, and models sharing devices
        through it (computed once: every pod and node resource is looked up here)."""
        return self._users.get(name, ((), ()))

    def accelerator_node_labels(self) -> dict[str, frozenset[str]]:
        """Labels that mark a node as carrying a catalog accelerator: key -> values (empty:
        any value). Our discovery's vendor label, every model's product and memory labels, and
        its selector labels with their values."""
        marks: dict[str, set[str]] = {discovery.VENDOR: set()}
        for model in self.models.values():
            for key in (*model.product_labels, model.memory_label):
                if key:
                    marks[key] = set()
            for key, value in model.selector.match_labels:
                if key not in marks or marks[key]:
                    marks.setdefault(key, set()).add(value)
        return {key: frozenset(values) for key, values in sorted(marks.items())}

    def identify_product(self, vendor: Vendor, product: str) -> AcceleratorModel | None:
        """The model of `vendor` a product name (vendor tool or node label) designates.

        An exact model name or alias wins over a product-name pattern; several pattern matches
        and no match give None.
        """
        found = [
            m for m in self.models.values() if m.vendor is vendor and m.matches_product(product)
        ]
        name = normalize_product(product)
        exact = [m for m in found if name in {normalize_product(n) for n in (m.model, *m.aliases)}]
        chosen = exact or found
        return chosen[0] if len(chosen) == 1 else None
