"""Parse an API path into what it names. Pure: no I/O, no store.

``/apis/batch/v1/namespaces/ml/jobs/pi/status`` -> Target(group="batch", version="v1", namespace="ml",
plural="jobs", name="pi", subresource="status").
"""

from __future__ import annotations

from dataclasses import dataclass

from .resources import ResourceType, lookup

# Subresources of namespaces themselves, which would otherwise look like a resource plural.
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass(frozen=True)
class Target:
    group: str
    version: str
    rt: ResourceType | None
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    subpath: str = ""  # what follows ``proxy/`` or a subresource


@dataclass(frozen=True)
class GroupVersion:
    group: str
    version: str


def parse(path: str) -> Target | GroupVersion | None:
    """Resolve a resource URL; a bare group-version URL gives GroupVersion; anything else None."""
    parts = [p for p in path.split("/") if p != ""]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return GroupVersion(group, version)
    namespace: str | None = None
    if (
        rest[0] == "namespaces"
        and len(rest) >= 3
        and not (group == "" and rest[2] in _NAMESPACE_SUBRESOURCES)
    ):
        namespace, rest = rest[1], rest[2:]
    plural, rest = rest[0], rest[1:]
    name = rest[0] if rest else None
    subresource = rest[1] if len(rest) > 1 else None
    subpath = "/".join(rest[2:]) if len(rest) > 2 else ""
    if path.endswith("/") and subresource == "proxy":
        subpath += "/"
    return Target(
        group, version, lookup(group, version, plural), plural, namespace, name, subresource, subpath
    )
