"""The Priority admission plugin (plugin/pkg/admission/priority): a new pod's ``priorityClassName`` becomes
its ``spec.priority`` and ``spec.preemptionPolicy``, as the scheduler's preemption reads them.

No class named: the ``globalDefault`` class if one exists, else priority 0. A class that does not exist is
refused (403 ``no PriorityClass with name <name> was found``), and so is a ``spec.priority`` that differs from
the class's value. The two classes upstream always has (``system-cluster-critical``,
``system-node-critical``) are known without objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .. import errors

Obj = dict[str, Any]

BUILT_IN: dict[str, int] = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


def _forbidden(pod: Obj, message: str) -> errors.StatusError:
    name = (pod.get("metadata") or {}).get("name") or ""
    return errors.StatusError(
        403, "Forbidden", f'pods "{name}" is forbidden: {message}', {"name": name, "kind": "pods"}
    )


def resolve_priority(
    pod: Obj, find: Callable[[str], Obj | None], classes: Callable[[], Iterable[Obj]]
) -> None:
    """Set ``spec.priority`` (and ``spec.preemptionPolicy`` from the class) on a pod being created."""
    spec = pod.setdefault("spec", {})
    name = spec.get("priorityClassName") or ""
    policy = None
    if name in BUILT_IN:
        value = BUILT_IN[name]
    elif name:
        found = find(name)
        if found is None:
            raise _forbidden(pod, f"no PriorityClass with name {name} was found")
        value, policy = int(found.get("value") or 0), found.get("preemptionPolicy")
    else:
        default = next((c for c in classes() if c.get("globalDefault")), None)
        value = int(default.get("value") or 0) if default is not None else 0
        if default is not None:
            spec["priorityClassName"] = default["metadata"]["name"]
            policy = default.get("preemptionPolicy")
    given = spec.get("priority")
    if given is not None and int(given) != value:
        raise _forbidden(
            pod,
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {value} from the given PriorityClass name",
        )
    spec["priority"] = value
    if policy and not spec.get("preemptionPolicy"):
        spec["preemptionPolicy"] = policy
