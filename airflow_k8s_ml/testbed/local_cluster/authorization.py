"""``authorization.k8s.io/v1`` self reviews: what ``kubectl auth can-i`` (and ``--list``) asks.

The local cluster's authorization model is its one bearer token (security.py): whoever holds it may do
anything, as a member of ``system:masters`` (cluster-admin) may on a real cluster; there is no RBAC model.
So every review is allowed and says why. Like upstream's ``pkg/registry/authorization``, a review is
validated (exactly one of resourceAttributes and nonResourceAttributes), answered with 201 and never
stored.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from . import errors, routing
from .decoding import decode_body
from .resources import ANSWER, lookup
from .responses import JSON, json_response
from .services import ClusterServices

Obj = dict[str, Any]
REASON = "allowed by the local cluster: its bearer token is cluster-admin (there is no RBAC model)"
_GROUP, _VERSION = "authorization.k8s.io", "v1"


def access_review(review: Obj) -> Obj:
    """The answered SelfSubjectAccessReview (raises 422 on an invalid spec, as upstream's validation)."""
    spec = review.get("spec") or {}
    given = [k for k in ("resourceAttributes", "nonResourceAttributes") if spec.get(k) is not None]
    if len(given) != 1:
        detail = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        cause = ("spec.resourceAttributes", "FieldValueInvalid", f'Invalid value: "null": {detail}')
        raise errors.invalid("SelfSubjectAccessReview", _GROUP, "SelfSubjectAccessReview", "", [cause])
    return _answered(review, {"allowed": True, "reason": REASON})


def rules_review(review: Obj) -> Obj:
    """The answered SelfSubjectRulesReview: everything, everywhere (what ``auth can-i --list`` prints)."""
    if not (review.get("spec") or {}).get("namespace"):
        cause = ("spec.namespace", "FieldValueRequired", "Required value")
        raise errors.invalid("SelfSubjectRulesReview", _GROUP, "SelfSubjectRulesReview", "", [cause])
    status = {
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": False,
    }
    return _answered(review, status)


def _answered(review: Obj, status: Obj) -> Obj:
    return {
        "kind": review.get("kind"),
        "apiVersion": f"{_GROUP}/{_VERSION}",
        "metadata": {**(review.get("metadata") or {}), "creationTimestamp": None},
        "spec": review.get("spec") or {},
        "status": status,
    }


def _handler(answer: Any) -> Any:
    async def handle(request: web.Request, target: routing.Target) -> web.StreamResponse:
        body = decode_body(await request.read(), request.headers.get("Content-Type", JSON)).body
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        return json_response(answer(body), 201)

    return handle


def attach(cluster: ClusterServices) -> None:
    for plural, answer in (
        ("selfsubjectaccessreviews", access_review),
        ("selfsubjectrulesreviews", rules_review),
    ):
        rt = lookup(_GROUP, _VERSION, plural)
        assert rt is not None
        cluster.register_subresource(rt, ANSWER, _handler(answer))
