"""One mapping from a failed HTTP answer of the API server to :class:`ApiError` (pure).

Why one place: the sync client, the async client and the watch all receive the same ``Status`` bodies and
``Retry-After`` headers; reading them once keeps "what went wrong" identical everywhere (kopf's
``check_response``). The class itself lives in the package's one error tree (:mod:`airflow_k8s_ml.errors`)
and is re-exported here for the callers that think of it as "the client's error".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.errors import ApiError

__all__ = ["ApiError", "api_error", "retry_after_seconds"]


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """``Retry-After`` as seconds (the API server always sends the delta-seconds form)."""
    if not headers:
        return None
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def _status_body(body: bytes | str | Mapping[str, Any] | None) -> Mapping[str, Any]:
    if isinstance(body, Mapping):
        return body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {"message": body.strip()[:500]}
    return parsed if isinstance(parsed, Mapping) else {}


def api_error(
    status: int, body: bytes | str | Mapping[str, Any] | None, headers: Mapping[str, str] | None = None
) -> ApiError:
    """Build the error for a non-2xx answer, from the ``Status`` object when the body is one."""
    parsed = _status_body(body)
    code = parsed.get("code")
    status = code if isinstance(code, int) and code else status
    return ApiError(
        status,
        str(parsed.get("reason") or "Failure"),
        str(parsed.get("message") or f"HTTP {status}"),
        retry_after=retry_after_seconds(headers),
        details=parsed.get("details") if isinstance(parsed.get("details"), Mapping) else None,
    )
