"""The pod admission function the kubelet registers: defaults, then validation, then status on create.

One function so the order is explicit (upstream: mutating admission -> defaulting -> validation), and
so a pod written through any verb (POST, PUT, PATCH, server-side apply) gets the same treatment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .. import errors
from .defaults import apply_pod_defaults, initial_status
from .priority import resolve_priority
from .validation import validate_pod, validate_update

Obj = dict[str, Any]


def pod_admission(
    default_grace: int,
    priority_class: Callable[[str], Obj | None] = lambda name: None,
    priority_classes: Callable[[], Iterable[Obj]] = tuple,
) -> Callable[[Obj, Obj | None], Obj]:
    """Build the admission function; ``default_grace`` is the settings' default grace period;
    ``priority_class`` finds a PriorityClass by name and ``priority_classes`` lists them (the Priority
    plugin, on create)."""

    def admit(pod: Obj, old: Obj | None) -> Obj:
        if old is None:
            resolve_priority(pod, priority_class, priority_classes)
        apply_pod_defaults(pod, default_grace)
        causes = validate_pod(pod)
        if old is not None and not causes:
            causes = validate_update(pod, old)
        if causes:
            name = (pod.get("metadata") or {}).get("name") or (pod.get("metadata") or {}).get(
                "generateName", ""
            )
            raise errors.invalid("Pod", "", "pods", name, causes)
        if old is None:
            pod["status"] = initial_status(pod)
        return pod

    return admit
