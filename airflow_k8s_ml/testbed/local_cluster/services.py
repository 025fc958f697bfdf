"""What a controller or the kubelet may use of the cluster it runs in, and nothing more.

Controllers are written against :class:`ClusterServices`, not against :class:`~.cluster.LocalCluster`:
the cluster wires them (it imports them), they only use the few things listed here (the store, the event
recorder, the settings and its clock, the metrics, and the extension points of the API server), so no
controller module imports the module that builds the cluster and there is no import circle between them.
``LocalCluster`` provides these members; a test may provide them with any other object.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from . import routing
from .events import EventRecorder
from .metrics import Metrics
from .resources import ResourceType
from .settings import ClusterSettings
from .store import Obj, Store

# Admission: (object being written, previous object or None) -> object to store; raises StatusError (422).
Admission = Callable[[Obj, Obj | None], Obj]
# Version conversion for kinds served at several versions (HPA v1 <-> v2): (obj, target rt) -> obj.
Converter = Callable[[Obj, ResourceType], Obj]
# A subresource the API server serves for a kind (``pods/log``, ``deployments/scale``, ...).
SubresourceHandler = Callable[[web.Request, routing.Target], Awaitable[web.StreamResponse]]
# An operation under ``/admin/<name>`` (fault injection, node-pressure eviction): request body -> answer.
AdminAction = Callable[[dict[str, Any]], Any]


class ClusterServices(Protocol):
    store: Store
    settings: ClusterSettings
    events: EventRecorder
    metrics: Metrics

    @property
    def url(self) -> str:
        """The API server's URL, known once the cluster has started (pods get it in their environment)."""
        ...

    def register_admission(self, rt: ResourceType, fn: Admission) -> None: ...

    def register_converter(self, rt: ResourceType, fn: Converter) -> None: ...

    def register_subresource(self, rt: ResourceType, name: str, handler: SubresourceHandler) -> None: ...

    def register_reader(self, rt: ResourceType, handler: SubresourceHandler) -> None:
        """Serve every request for a virtual kind (one with nothing stored: the metrics APIs)."""
        ...

    def register_admin_action(self, name: str, action: AdminAction) -> None: ...

    def admit(self, rt: ResourceType, obj: Obj, old: Obj | None) -> Obj:
        """An object as a client's write would store it: converted, named, defaulted and validated."""
        ...

    def to_storage(self, rt: ResourceType, obj: Obj) -> Obj: ...

    def present(self, rt: ResourceType, obj: Obj) -> Obj:
        """A stored object at the version ``rt`` serves."""
        ...

    def running_controller(self, name: str) -> object | None:
        """The running controller of that name, if any (a controller that borrows another's state)."""
        ...
