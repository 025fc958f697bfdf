"""Shared fixtures: the local cluster (tests/cluster_fixtures.py) and local S3 (tests/s3_fixtures.py).

Under CI (``CI=true``, as ``.ci/run`` runs) a skipped test is a failure unless its reason is one of
:data:`ALLOWED_SKIPS`: a missing tool (kubectl, Chromium, torch) must fail the build, not turn a test off
while CI stays green. Every skipped test is listed with its reason at the end of the run.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

# The hold after a deferral (``min_deferral_seconds`` against an Airflow 3.3 scheduler race: see
# airflow_k8s_ml/config.py) guards a real scheduler; the in-process tests drive the triggers themselves,
# where it would only add seconds to every quick deferral. The production tier's Airflow keeps the default
# (its stack drops AIRFLOW* variables), and test_workload_trigger.py tests the hold itself.
os.environ.setdefault("AIRFLOW__AIRFLOW_K8S_ML__MIN_DEFERRAL_SECONDS", "0")

pytest_plugins = ["tests.cluster_fixtures", "tests.upstream_schemas_plugin"] + (
    ["tests.s3_fixtures"] if importlib.util.find_spec("tests.s3_fixtures") else []
)

#: Skip reasons CI accepts (substrings): what holds by the machine's nature, not by a missing install.
#: CI runs as root, so the tests of what a non-root cluster does cannot run there.
ALLOWED_SKIPS = ("the non-root behaviour is only seen as non-root",)

_skipped: list[tuple[str, str]] = []


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def skip_reason(report: pytest.TestReport) -> str:
    """The reason a skipped report gives (``pytest.skip``'s message or a ``skipif`` reason)."""
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
    else:
        reason = str(longrepr)
    return reason.removeprefix("Skipped: ")


def disallowed(skipped: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The skipped tests whose reason is not on :data:`ALLOWED_SKIPS`."""
    return [(test, why) for test, why in skipped if not any(ok in why for ok in ALLOWED_SKIPS)]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append((report.nodeid, skip_reason(report)))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _in_ci() or not _skipped:
        return
    terminalreporter.section("skipped tests (CI)")
    for test, why in _skipped:
        allowed = "allowed" if any(ok in why for ok in ALLOWED_SKIPS) else "NOT ALLOWED"
        terminalreporter.line(f"{allowed:11} {test}: {why}")
    refused = disallowed(_skipped)
    if refused:
        terminalreporter.line(
            f"{len(refused)} skipped for a reason not in ALLOWED_SKIPS (tests/conftest.py): the run fails",
            red=True,
        )


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI, a skip for a reason not on the allowed list fails the run (exit status 1)."""
    if _in_ci() and disallowed(_skipped) and session.exitstatus in (0, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
