"""Running a plan: the pure half of both clients' send loop (sans-I/O).

The clients differ only in how they send (``kubernetes`` vs ``kubernetes_asyncio``) and sleep (``time`` vs
``asyncio``). What to send next, whether an answer is a value or an error, when to retry and for how long
(:class:`~.retry.RetryPolicy`), when to reload credentials, and what the plan makes of an error that no
retry fixed: all decided here, once. A client's loop is::

    talk = Conversation(plan, policy)
    step = talk.start()
    while step is not None:
        (refresh credentials if step.refresh) (sleep step.wait)
        step = talk.answered(send(step.request))   # or talk.failed(error) when nothing answered
    return talk.result
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from airflow_k8s_ml.errors import ApiError
from airflow_k8s_ml.kube.operations import Plan
from airflow_k8s_ml.kube.requests import Reply, Request, read_reply
from airflow_k8s_ml.kube.retry import RetryPolicy

__all__ = ["Conversation", "Step"]

T = TypeVar("T")


@dataclass(frozen=True)
class Step:
    """Send ``request``, after reloading the credentials (``refresh``) and waiting ``wait`` seconds."""

    request: Request
    wait: float = 0.0
    refresh: bool = False


class Conversation(Generic[T]):
    """One plan's progress: the request in flight, its attempt count, and finally the plan's result."""

    def __init__(self, plan: Plan[T], policy: RetryPolicy) -> None:
        self._plan = plan
        self._policy = policy
        self._attempt = 0
        self._refreshed = False
        self._request: Request | None = None
        self.result: T

    def start(self) -> Step | None:
        return self._advance(lambda: next(self._plan))

    def answered(self, reply: Reply) -> Step | None:
        """An HTTP answer to the current request (any status)."""
        assert self._request is not None
        try:
            value = read_reply(reply, self._request.decode)
        except ApiError as exc:
            return self.failed(exc)
        return self._advance(lambda: self._plan.send(value))

    def failed(self, error: ApiError) -> Step | None:
        """The current request failed (``status`` 0: no answer): retry it, or hand the error to the plan.

        A stream is opened once (a refused or lost one is its reader's to handle), after fresh credentials
        if the first try was refused with 401."""
        request = self._request
        assert request is not None
        if self._policy.refresh(error, self._refreshed):
            self._refreshed = True
            return Step(request, refresh=True)
        delay = None if request.decode == "stream" else self._policy.delay(error, self._attempt)
        if delay is not None:
            self._attempt += 1
            return Step(request, wait=delay)
        return self._advance(lambda: self._plan.throw(error))

    def _advance(self, resume: Callable[[], Request]) -> Step | None:
        try:
            self._request = resume()
        except StopIteration as stop:
            self.result = stop.value
            self._request = None
            return None
        self._attempt, self._refreshed = 0, False
        return Step(self._request)
