"""Fixtures shared by the watch and trigger tests (the cluster ones are in tests/cluster_fixtures.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from airflow_k8s_ml.kube.async_client import close_all
from airflow_k8s_ml.kube.watch import WatchRegistry, reset_registry

from .workload_helpers import FAST_WATCH


@pytest.fixture()
async def registry() -> AsyncIterator[WatchRegistry]:
    """A fresh process-wide watch registry with test timings; closed, with every async client, afterwards."""
    registry = reset_registry(FAST_WATCH)
    yield registry
    await registry.close()
    await close_all()
