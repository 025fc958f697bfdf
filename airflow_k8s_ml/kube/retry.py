"""Retry as data: which failures are worth another try, and how long to wait (pure).

Why data: the sync client, the async client and the watch share one policy, and tests shrink the delays
instead of sleeping (kopf ``NetworkingSettings.error_backoffs``). 429 honours the server's
``Retry-After``; 5xx and lost connections walk the backoff sequence; a 401 reloads the credentials once
(short-lived exec-plugin tokens, EKS/GKE) and tries again; everything else (400, 403, 404, 409, 422, a
second 401) is an answer, not a hiccup, and is raised at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_k8s_ml.kube.errors import ApiError

__all__ = ["RETRYABLE_STATUSES", "RetryPolicy"]

#: 0 = no HTTP answer at all (connection refused/reset, timeout).
RETRYABLE_STATUSES = frozenset({0, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """``backoffs[i]`` is the wait before retry ``i + 1``; the sequence's length bounds the retries.

    ``max_retry_after`` caps a server-requested delay so a misbehaving proxy cannot park a task for hours.
    """

    backoffs: tuple[float, ...] = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)
    max_retry_after: float = 30.0

    def refresh(self, error: BaseException, refreshed: bool) -> bool:
        """Reload the connection's credentials and send again: a first 401 of a request."""
        return isinstance(error, ApiError) and error.status == 401 and not refreshed

    def delay(self, error: BaseException, attempt: int) -> float | None:
        """Seconds to wait before retry number ``attempt`` (0-based), or None to give up and raise."""
        if attempt >= len(self.backoffs) or not is_retryable(error):
            return None
        if isinstance(error, ApiError) and error.status == 429 and error.retry_after is not None:
            return min(error.retry_after, self.max_retry_after)
        return self.backoffs[attempt]


def is_retryable(error: BaseException) -> bool:
    """Transient: throttled, server-side failure, or no answer (connection-level errors)."""
    if isinstance(error, ApiError):
        return error.status in RETRYABLE_STATUSES
    return isinstance(error, (ConnectionError, TimeoutError, OSError))
