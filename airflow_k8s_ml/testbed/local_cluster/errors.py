"""The local cluster's one error tree, and the one place an error becomes a Kubernetes ``Status`` object.

Every exception the local cluster defines derives from :class:`LocalClusterError`. Handlers, admission and
the store raise :class:`StatusError` (through the constructors below); :func:`as_status` turns whatever
reaches the API server's edge (a ``StatusError``, a PATCH or selector error, a body nested too deeply)
into one, and :meth:`StatusError.status` renders the ``{"kind": "Status", ...}`` body a real
kube-apiserver sends, with the same reasons, codes and messages, because clients (kubectl, the Python
clients, Airflow's hooks) branch on them. (The *client* side's error is ``airflow_k8s_ml.errors.ApiError``,
whose ``.status`` is the HTTP code; the local cluster imports nothing from it.)
"""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.k8s.selectors import SelectorError


class LocalClusterError(Exception):
    """Root of every error the local cluster raises (controllers' internal signals included)."""


class StatusError(LocalClusterError):
    """An error the API server answers with a Status object (``code`` is the Status's ``code`` field)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        """The Status body a kube-apiserver would send for this error."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:  # StatusReasonUnknown is "" and omitted, as for errors storage passes on
            del body["reason"]
        if self.details is not None:
            body["details"] = self.details
        return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def _details(
    name: str, group: str, plural: str, causes: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    if causes:
        details["causes"] = causes
    return details


def as_status(exc: BaseException) -> StatusError:
    """The Status an error reaching the API's edge is answered with: typed errors as they are, a
    selector error as upstream's 400, anything else of ours as a 500 naming it."""
    if isinstance(exc, StatusError):
        return exc
    if isinstance(exc, SelectorError):
        return bad_request(exc.message)
    if isinstance(exc, RecursionError):  # a body nested too deeply for some step after decoding
        return bad_request("the request body is nested too deeply")
    return internal_error(str(exc))


def not_found(group: str, plural: str, name: str) -> StatusError:
    return StatusError(
        404, "NotFound", f'{_qualified(plural, group)} "{name}" not found', _details(name, group, plural)
    )


def already_exists(group: str, plural: str, name: str) -> StatusError:
    return StatusError(
        409,
        "AlreadyExists",
        f'{_qualified(plural, group)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(group: str, plural: str, name: str) -> StatusError:
    message = (
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": '
        "the object has been modified; "
        "please apply your changes to the latest version and try again"
    )
    return StatusError(409, "Conflict", message, _details(name, group, plural))


def invalid(kind: str, group: str, plural: str, name: str, causes: list[tuple[str, str, str]]) -> StatusError:
    """422 Invalid. ``causes`` are (field, reason, message) as in field.ErrorList, e.g.
    ("spec.template.spec.restartPolicy", "FieldValueNotSupported", 'Unsupported value: "Always": ...')."""
    qualified_kind = f"{kind}.{group}" if group else kind
    summary = ", ".join(f"{field}: {message}" for field, _, message in causes)
    if len(causes) > 1:
        summary = "[" + summary + "]"
    cause_dicts = [
        {"reason": reason, "message": message, "field": field} for field, reason, message in causes
    ]
    return StatusError(
        422,
        "Invalid",
        f'{qualified_kind} "{name}" is invalid: {summary}',
        {"name": name, "group": group, "kind": kind, "causes": cause_dicts}
        if group
        else {"name": name, "kind": kind, "causes": cause_dicts},
    )


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> StatusError:
    return StatusError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f'application/json, application/yaml, application/vnd.kubernetes.protobuf (got "{content_type}")',
    )


def request_entity_too_large(limit: int) -> StatusError:
    return StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


def expired(requested: str, oldest: int) -> StatusError:
    return StatusError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def too_many_requests(retry_after: int) -> StatusError:
    return StatusError(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
        {"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def internal_error(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}")


def service_unavailable(message: str = "the server is currently unable to handle the request") -> StatusError:
    return StatusError(503, "ServiceUnavailable", message)
