"""Typed API errors of the local cluster, rendered to Kubernetes ``Status`` objects in exactly one place.

Handlers and the store raise :class:`ApiError` (through the constructors below); the server turns it into the
``{"kind": "Status", ...}`` body a real kube-apiserver sends, with the same reasons, codes and messages,
because
clients (kubectl, the Python clients, Airflow's hooks) branch on them.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error the API server answers with a Status object."""

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


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{_qualified(plural, group)} "{name}" not found', _details(name, group, plural)
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(plural, group)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(group: str, plural: str, name: str) -> ApiError:
    message = (
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": '
        "the object has been modified; "
        "please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", message, _details(name, group, plural))


def invalid(kind: str, group: str, plural: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid. ``causes`` are (field, reason, message) as in field.ErrorList, e.g.
    ("spec.template.spec.restartPolicy", "FieldValueNotSupported", 'Unsupported value: "Always": ...')."""
    qualified_kind = f"{kind}.{group}" if group else kind
    summary = ", ".join(f"{field}: {message}" for field, _, message in causes)
    if len(causes) > 1:
        summary = "[" + summary + "]"
    cause_dicts = [
        {"reason": reason, "message": message, "field": field} for field, reason, message in causes
    ]
    return ApiError(
        422,
        "Invalid",
        f'{qualified_kind} "{name}" is invalid: {summary}',
        {"name": name, "group": group, "kind": kind, "causes": cause_dicts}
        if group
        else {"name": name, "kind": kind, "causes": cause_dicts},
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f'application/json, application/yaml (got "{content_type}"; '
        "the local cluster speaks JSON only, not protobuf)",
    )


def request_entity_too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def expired(requested: str, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
        {"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def internal_error(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def service_unavailable(message: str = "the server is currently unable to handle the request") -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)
