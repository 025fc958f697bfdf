"""Pytest plugin: every object our clients write, checked against upstream's published schema (strictly).

The provider writes objects in one place, the two clients' ``send`` (``kube/sync_client.py`` KubeClient and
``kube/async_client.py`` AsyncKube: every operator, sensor and trigger write goes through one of them). This
plugin wraps both for the session, observing only: each POST, PUT and server-side apply of a whole object
that the API server accepted (2xx; a write it refused is a test of bad input, not something we rendered) is
validated by :mod:`tests.upstream_schemas`. A field upstream does not know fails the test that sent it, at
its teardown, with the field's path; the terminal summary says how many objects of each kind were checked.
Production-tier tests (their Airflow runs in other processes) are not observed.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.upstream_schemas import problems, schema_of

_WRITES = {"POST", "PUT"}
_APPLY = "application/apply-patch+yaml"


class Recorder:
    def __init__(self) -> None:
        self.validated: Counter[str] = Counter()
        self.unchecked: Counter[str] = Counter()
        self.found: list[str] = []  # problems since the current test began

    def observe(self, request: Any, status: int) -> None:
        body = request.body
        whole = request.method in _WRITES or (request.method == "PATCH" and request.content_type == _APPLY)
        if not (whole and 200 <= status < 300 and isinstance(body, dict) and body.get("kind")):
            return
        if request.path.endswith("/status"):
            return
        kind = f"{body.get('apiVersion')} {body['kind']}"
        found = problems(body)
        if found is None:
            self.unchecked[kind] += 1
            return
        self.validated[f"{kind} ({schema_of(body)})"] += 1
        name = (body.get("metadata") or {}).get("name") or (body.get("metadata") or {}).get("generateName")
        self.found.extend(f"{kind} {name}: {problem}" for problem in found)


RECORDER = Recorder()


def _install() -> None:
    from airflow_k8s_ml.kube.async_client import AsyncKube
    from airflow_k8s_ml.kube.sync_client import KubeClient

    sync_send = KubeClient.send
    async_send = AsyncKube.send

    @functools.wraps(sync_send)
    def observed_sync(self: Any, request: Any) -> Any:
        reply = sync_send(self, request)
        RECORDER.observe(request, reply.status)
        return reply

    @functools.wraps(async_send)
    async def observed_async(self: Any, request: Any) -> Any:
        reply = await async_send(self, request)
        RECORDER.observe(request, reply.status)
        return reply

    KubeClient.send = observed_sync  # type: ignore[method-assign]
    AsyncKube.send = observed_async  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    _install()


@pytest.fixture(autouse=True)
def _upstream_schemas() -> Iterator[None]:
    """Fail the test that sent an object upstream's schema refuses, naming the field."""
    RECORDER.found.clear()
    yield
    if RECORDER.found:
        found, RECORDER.found[:] = list(RECORDER.found), []
        pytest.fail("sent objects upstream's schemas refuse:\n" + "\n".join(found), pytrace=False)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RECORDER.validated and not RECORDER.unchecked:
        return
    total = sum(RECORDER.validated.values())
    terminalreporter.write_line(f"upstream schemas: {total} objects validated")
    for kind, count in sorted(RECORDER.validated.items()):
        terminalreporter.write_line(f"  {count:5d}  {kind}")
    if RECORDER.unchecked:
        unchecked = ", ".join(f"{kind} {count}" for kind, count in sorted(RECORDER.unchecked.items()))
        terminalreporter.write_line(f"  no published schema: {unchecked}")
