"""The Kubernetes grammar of names, labels, annotations, images and text (pure), shared by the
manifest (`federation.spec`) and the pod template subset (`federation.podtemplate`)."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated

from pydantic import AfterValidator, StringConstraints

from federation.validation import NUL_FREE

MAX_LABELS = 64
MAX_ANNOTATION_BYTES = 256 * 1024  # Kubernetes' limit on all annotations of an object

# pydantic runs these on Rust's regex engine: `$` is the very end (see federation.validation)
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
DnsLabel = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=DNS_LABEL)]
LabelValue = Annotated[str, StringConstraints(max_length=63, pattern=LABEL_VALUE)]


def qualified_name(key: str) -> bool:
    """Whether `key` is a Kubernetes qualified name (label and annotation keys).

    `[prefix/]name`: the optional prefix a DNS subdomain of at most 253 characters, the name
    at most 63 characters of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
    """
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and _NAME.fullmatch(name) is not None


def label_map(value: dict[str, str]) -> dict[str, str]:
    """`value` if it is a valid Kubernetes label set, else ValueError naming the bad label."""
    if len(value) > MAX_LABELS:
        raise ValueError(f"at most {MAX_LABELS} labels, got {len(value)}")
    for key, val in value.items():
        if not qualified_name(key):
            raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
        if len(val) > 63 or (val and _NAME.fullmatch(val) is None):
            raise ValueError(f"label value {val!r} of {key!r} is not a valid label value")
    return value


Labels = Annotated[dict[str, str], AfterValidator(label_map)]


def annotation_map(value: dict[str, str]) -> dict[str, str]:
    """`value` if its keys are qualified names and its size is within Kubernetes' limit."""
    for key in value:
        if not qualified_name(key):
            raise ValueError(f"annotation key {key!r} is not a valid Kubernetes annotation key")
    size = sum(len(k.encode()) + len(v.encode()) for k, v in value.items())
    if size > MAX_ANNOTATION_BYTES:
        raise ValueError(
            f"annotations total {size} bytes; Kubernetes allows {MAX_ANNOTATION_BYTES}"
        )
    return value


Image = Annotated[str, StringConstraints(min_length=1, max_length=512, pattern=r"^[^\s\x00]+$")]
"""A container image reference: no whitespace (Kubernetes refuses surrounding space) or NUL."""
Text = Annotated[str, StringConstraints(max_length=4096), NUL_FREE]


_NAMESPACE_MAX = 63  # a namespace name is a DNS label
_HASH_CHARS = 10


def tenant_namespace(prefix: str, tenant: str) -> str:
    """The namespace of `tenant`'s pods in a member cluster whose agent uses `prefix`.

    `<prefix>-<tenant>` when that has at most 62 characters; otherwise exactly 63:
    `<prefix>-<start of tenant>-<10 hex of sha256(tenant)>`. Short forms are at most 62
    characters and long forms exactly 63, so a short form never equals a long one; two short
    forms differ where the tenants do, two long forms where the hashes do. Tenant names are
    DNS labels (the API's grammar), so both forms are valid namespace names.
    """
    short = f"{prefix}-{tenant}"
    if len(short) < _NAMESPACE_MAX:
        return short
    digest = hashlib.sha256(tenant.encode()).hexdigest()[:_HASH_CHARS]
    keep = _NAMESPACE_MAX - len(prefix) - len(digest) - 2
    if keep < 1:
        raise ValueError(f"namespace prefix {prefix!r} is too long for tenant namespaces")
    return f"{prefix}-{tenant[:keep]}-{digest}"  # "--" inside a label is valid


NAMESPACE_PREFIX_MAX = 40  # leaves a long-form tenant namespace 11 characters of the tenant


def valid_namespace_prefix(prefix: str) -> bool:
    """Whether `prefix` is a DNS label short enough to prefix tenant namespaces."""
    return len(prefix) <= NAMESPACE_PREFIX_MAX and re.fullmatch(DNS_LABEL[1:-1], prefix) is not None


def in_tenant_namespace(prefix: str, namespace: str) -> bool:
    """Whether `namespace` is `prefix` itself or one of its tenant namespaces."""
    return namespace == prefix or namespace.startswith(f"{prefix}-")
