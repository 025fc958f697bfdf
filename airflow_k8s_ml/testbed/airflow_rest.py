"""A small client of Airflow 3's public REST API (``/api/v2``), as a user or a script would use it.

Used by ``make demo``, ``airflow-k8s-ml standalone`` and the production-mode tests: runs are triggered here
with ``logical_date: null`` (Airflow 3's default for manual runs), watched through the API, and their task
logs read back the way the UI reads them. Authentication is the simple auth manager's
``POST /auth/token`` with a username and password; the JWT is renewed when it expires.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["TERMINAL_RUN_STATES", "AirflowRest", "RestError"]

TERMINAL_RUN_STATES = frozenset({"success", "failed"})
TERMINAL_TASK_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


class RestError(RuntimeError):
    """The API answered with an error status (the body says why)."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status


@dataclass
class AirflowRest:
    """``base_url`` is the API server's root (``http://127.0.0.1:PORT``)."""

    base_url: str
    username: str
    password: str
    timeout: float = 60.0  # per request: an API server on a loaded 2-core machine took over 30 s once

    def __post_init__(self) -> None:
        self._http = httpx.Client(base_url=self.base_url, timeout=self.timeout)
        self._token: str | None = None

    def close(self) -> None:
        self._http.close()

    # -- transport --------------------------------------------------------------------------------------
    def _login(self) -> str:
        response = self._http.post("/auth/token", json={"username": self.username, "password": self.password})
        if response.status_code >= 300:
            raise RestError("POST", "/auth/token", response.status_code, response.text)
        return str(response.json()["access_token"])

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        extra_headers = kwargs.pop("headers", {})
        for attempt in range(2):
            if self._token is None:
                self._token = self._login()
            headers = {**extra_headers, "Authorization": f"Bearer {self._token}"}
            response = self._http.request(method, path, headers=headers, **kwargs)
            if response.status_code == 401 and attempt == 0:
                self._token = None  # expired: log in again once
                continue
            if response.status_code >= 300:
                raise RestError(method, path, response.status_code, response.text)
            return response.json() if response.content else None
        raise AssertionError("unreachable")

    def healthy(self) -> bool:
        try:
            response = self._http.get("/api/v2/monitor/health", timeout=2.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    # -- DAGs and runs ----------------------------------------------------------------------------------
    def dag(self, dag_id: str) -> dict[str, Any] | None:
        try:
            return dict(self.request("GET", f"/api/v2/dags/{dag_id}"))
        except RestError as exc:
            if exc.status == 404:
                return None
            raise

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": paused})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        """A manual run with no logical date, as the UI's trigger form and ``airflow dags trigger`` create."""
        body = {"logical_date": None, "conf": dict(conf or {})}
        run = self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)
        return str(run["dag_run_id"])

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"])

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}"))

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run (mapped ones included), all pages."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances"
        found: list[dict[str, Any]] = []
        while True:
            page = self.request("GET", path, params={"limit": 100, "offset": len(found)})
            found += page["task_instances"]
            if not page["task_instances"] or len(found) >= page["total_entries"]:
                return found

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"))

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        """What the UI's "mark failed/success" does."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"
        self.request("PATCH", path, json={"new_state": state})

    def clear_task(self, dag_id: str, run_id: str, task_id: str) -> None:
        """What the UI's "clear" does for one task instance (downstream left alone)."""
        body = {
            "dry_run": False,
            "task_ids": [task_id],
            "dag_run_id": run_id,
            "only_failed": False,
            "reset_dag_runs": True,
        }
        self.request("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", json=body)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> list[dict[str, Any]]:
        """The task log as the UI reads it: structured entries (``event``, ``timestamp``, ...)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        content = self.request(
            "GET", path, params={"full_content": "true"}, headers={"Accept": "application/json"}
        )["content"]
        return [entry if isinstance(entry, dict) else {"event": str(entry)} for entry in content]

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}"
        try:
            return self.request("GET", path, params={"deserialize": "true"})["value"]
        except RestError as exc:
            if exc.status == 404:
                return None
            raise

    # -- waiting ----------------------------------------------------------------------------------------
    def wait_for(self, what: str, probe: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
        """Poll ``probe`` until it returns something truthy; the error names what was awaited.

        A probe whose request timed out counts as "not yet": an API server slow to answer under load (300
        task starts on two cores) is not a wrong answer; the deadline still bounds the wait.
        """
        deadline = time.monotonic() + timeout
        slow = 0
        while True:
            try:
                value = probe()
            except httpx.TimeoutException:
                slow, value = slow + 1, None
            if value:
                return value
            if time.monotonic() > deadline:
                late = f" ({slow} requests timed out)" if slow else ""
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{late}")
            time.sleep(interval)

    def wait_dag(self, dag_id: str, timeout: float = 120.0) -> dict[str, Any]:
        return dict(self.wait_for(f"DAG {dag_id} to be parsed", lambda: self.dag(dag_id), timeout))

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 1800.0) -> dict[str, Any]:
        def finished() -> dict[str, Any] | None:
            run = self.run(dag_id, run_id)
            return run if run["state"] in TERMINAL_RUN_STATES else None

        return dict(self.wait_for(f"run {run_id} of {dag_id} to finish", finished, timeout))

    def wait_task_state(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        states: set[str],
        timeout: float = 300.0,
        interval: float = 0.2,
    ) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            ti = self.task_instance(dag_id, run_id, task_id)
            return ti if ti.get("state") in states else None

        return dict(self.wait_for(f"{task_id} in {sorted(states)}", reached, timeout, interval))
