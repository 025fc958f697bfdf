"""Per-kind deletion rules, registered by the module that owns each kind, consulted by the generic store and
API server.

Upstream keeps such rules in each kind's registry strategy (``pkg/registry/core/pod``: graceful deletion;
``pkg/registry/core/namespace``: deleting a namespace empties it; DELETE of a pod answers with the pod).
Here the owner registers them at attach time (the kubelet for pods, the namespace lifecycle for namespaces),
so :mod:`.store` and :mod:`.server` name no kind and a new kind brings its rules with its own module.
Admission (defaults and validation on write) is registered the same way, with
``ClusterServices.register_admission`` (:mod:`.services`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


def _no_grace(obj: Obj, requested: int | None) -> int | None:
    return None


def _always(obj: Obj) -> bool:
    return True


@dataclass(frozen=True)
class DeleteRule:
    """What DELETE does for one kind beyond the generic finalizers and propagation policy.

    ``grace_period(obj, requested)``: seconds the object stays terminating (``deletionTimestamp`` set)
    before it may go, or None to go at once (pods: while the kubelet stops their processes).
    ``removable(obj)``: whether a terminating object without finalizers may be removed now (pods: only
    once the kubelet confirmed with a zero grace period).
    ``empties_namespace``: deleting it deletes every object in the namespace it names (namespaces).
    ``answers_with_object``: DELETE answers with the object instead of a ``Status`` (pods).
    """

    grace_period: Callable[[Obj, int | None], int | None] = _no_grace
    removable: Callable[[Obj], bool] = _always
    empties_namespace: bool = False
    answers_with_object: bool = False


DEFAULT = DeleteRule()


class DeleteRules:
    """The registry: storage key (group, plural) -> :class:`DeleteRule`; kinds not registered get
    :data:`DEFAULT`."""

    def __init__(self) -> None:
        self._rules: dict[tuple[str, str], DeleteRule] = {}

    def register(self, storage_key: tuple[str, str], rule: DeleteRule) -> None:
        self._rules[storage_key] = rule

    def __getitem__(self, storage_key: tuple[str, str]) -> DeleteRule:
        return self._rules.get(storage_key, DEFAULT)
