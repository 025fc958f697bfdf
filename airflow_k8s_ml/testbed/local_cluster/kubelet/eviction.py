"""Evicting pods, the two ways a real cluster does it.

- The ``pods/eviction`` subresource (``kubectl drain``, the Python client's
  ``create_namespaced_pod_eviction``): marks the pod ``DisruptionTarget=True reason=EvictionByEvictionAPI``
  and deletes it gracefully; answers 201 with a Status. PodDisruptionBudgets are stored but not enforced.
- Node-pressure eviction by the kubelet (the admin action ``evict``, for fault injection): the pod's
  processes are killed and it ends ``Failed`` with reason ``Evicted`` and ``DisruptionTarget`` reason
  ``TerminationByKubelet``, staying in the API like upstream evicted pods do.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .. import errors, routing
from ..meta import rfc3339
from ..resources import ResourceType
from ..responses import json_response
from ..store import Store
from .fit import TERMINAL_PHASES

Obj = dict[str, Any]
DEFAULT_PRESSURE_MESSAGE = "The node was low on resource: memory. "


def disruption_condition(reason: str, message: str) -> Obj:
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(time.time()),
    }


def add_condition(pod: Obj, condition: Obj) -> None:
    status = pod.setdefault("status", {})
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != condition["type"]]
    status["conditions"].append(condition)


def eviction_handler(
    store: Store, pods: ResourceType
) -> Callable[[web.Request, routing.Target], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request, target: routing.Target) -> web.StreamResponse:
        if request.method != "POST":
            raise errors.method_not_allowed()
        rt, namespace, name = pods, target.namespace or "", target.name or ""
        raw = await request.read()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise errors.bad_request("the body of the request was not valid JSON") from None
        body_name = (body.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        pod = store.get(rt, namespace, name)
        options = body.get("deleteOptions") or {}
        if (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
            store.mutate(
                rt,
                namespace,
                name,
                lambda p: add_condition(
                    p, disruption_condition("EvictionByEvictionAPI", "Eviction API: evicting")
                ),
            )
        store.delete(
            rt,
            namespace,
            name,
            grace_period=options.get("gracePeriodSeconds"),
            precondition_uid=(options.get("preconditions") or {}).get("uid"),
            precondition_rv=(options.get("preconditions") or {}).get("resourceVersion"),
        )
        return json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201
        )

    return handle
