"""Steady traffic to a Service through the API server's proxy, counted by answer: what a client of a model
sees while it is rolled out, canaried, promoted or rolled back.

Three callers, each one call every 100 ms by default: on a loaded machine one call can take a second or
more, and one caller would then leave gaps no one sees. Every answer is counted by (HTTP status, label),
where the label of a 200 is what ``label`` reads from its body (the model that served it, say) and of any
other answer its body's start; a call with no answer at all (a timeout, a refused connection) counts as
status 0. ``failures`` keeps each failed call's text, for the message of a failing check.

Used by the serving tests (integration and production tier) and ``bench/deploy_phases.py``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["ServiceTraffic"]


class ServiceTraffic:
    """``with ServiceTraffic(api_client, "ml", "digits:http", "predict", body=...) as traffic: ...``;
    ``body`` None sends GETs, else POSTs it as JSON."""

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        service: str,
        path: str,
        *,
        body: Any = None,
        label: Callable[[bytes], str] | None = None,
        callers: int = 3,
        every: float = 0.1,
    ) -> None:
        self.api_client = api_client
        self.url = f"/api/v1/namespaces/{namespace}/services/{service}/proxy/{path.lstrip('/')}"
        self.body = body
        self.label = label
        self.every = every
        self.seen: Counter[tuple[int, str]] = Counter()
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(callers)]

    @property
    def statuses(self) -> Counter[int]:
        """Calls by HTTP status (0: no answer)."""
        counted: Counter[int] = Counter()
        for (status, _), n in self.seen.items():
            counted[status] += n
        return counted

    def errors(self) -> dict[tuple[int, str], int]:
        """Every answer but a 200, by (status, label)."""
        return {key: n for key, n in self.seen.items() if key[0] != 200}

    def _call(self) -> tuple[int, str]:
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if self.body is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = self.api_client.call_api(
                self.url,
                "GET" if self.body is None else "POST",
                header_params=headers,
                body=self.body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=10,
            )
            return int(response.status), self.label(response.data) if self.label else ""
        except ApiException as exc:
            text = str(exc.body)[:160]
            self.failures.append(f"{exc.status} {text}")
            return int(exc.status), text
        except Exception as exc:  # no answer at all: a failed call too, with its cause
            self.failures.append(f"no answer: {type(exc).__name__}: {exc}"[:200])
            return 0, type(exc).__name__

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.seen[self._call()] += 1

    def __enter__(self) -> ServiceTraffic:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(15)
