"""Namespace lifecycle: deleting a namespace deletes everything in it (upstream's namespace controller does
this asynchronously behind the ``kubernetes`` finalizer; here the store does it in the same write, so a
namespace is gone with its contents when DELETE answers)."""

from __future__ import annotations

from ..kinds import DeleteRule
from ..resources import NAMESPACES
from .base import Controller

NAMESPACE_DELETE_RULE = DeleteRule(empties_namespace=True)


class NamespaceLifecycle(Controller):
    name = "namespace-lifecycle"

    def attach(self) -> None:
        self.store.delete_rules.register(NAMESPACES.storage_key, NAMESPACE_DELETE_RULE)

    async def reconcile(self, key: tuple[str, str]) -> None:
        return None
