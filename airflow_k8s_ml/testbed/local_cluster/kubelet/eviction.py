"""Evicting pods, the two ways a real cluster does it.

- The ``pods/eviction`` subresource (``kubectl drain``, the Python client's
  ``create_namespaced_pod_eviction``): marks the pod ``DisruptionTarget=True reason=EvictionByEvictionAPI``
  and deletes it gracefully; answers 201 with a Status. A PodDisruptionBudget that forbids it answers 429
  as upstream (:mod:`.eviction_budget`), and an eviction it allows spends one of its disruptions.
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
from ..resources import ResourceType, lookup
from ..responses import json_response
from ..store import Store
from .eviction_budget import decide_eviction
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


def _spend(pod_name: str, now: float) -> Callable[[Obj], None]:
    """``checkAndDecrement``: one disruption fewer, the pod noted in ``disruptedPods`` until the disruption
    controller sees it go."""

    def spend(pdb: Obj) -> None:
        status = pdb.setdefault("status", {})
        status["disruptionsAllowed"] = int(status.get("disruptionsAllowed") or 0) - 1
        status.setdefault("disruptedPods", {})[pod_name] = rfc3339(now)

    return spend


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
        pdbs = lookup("policy", "v1", "poddisruptionbudgets")
        assert pdbs is not None
        verdict = decide_eviction(pod, store.iter(pdbs, namespace))
        if verdict.spend is not None:
            store.mutate(pdbs, namespace, verdict.spend["metadata"]["name"], _spend(name, time.time()))
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
