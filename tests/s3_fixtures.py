"""Pytest fixtures for the embedded S3 endpoint (``airflow_k8s_ml.testbed.local_s3``): real HTTP on 127.0.0.1.

* ``local_s3``  - one moto server for the whole session (starting one costs ~0.1 s, but moto's state is
                  per process anyway, so tests isolate by bucket instead);
* ``s3_bucket`` - a fresh bucket per test;
* ``s3_env``    - the standard AWS variables (what pods get) plus ``AIRFLOW_CONN_AWS_DEFAULT`` (what Airflow
                  gets), set for one test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from airflow_k8s_ml.testbed.local_s3 import LocalS3


@pytest.fixture(scope="session")
def local_s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        yield server


@pytest.fixture
def s3_env(local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = local_s3.credentials.env()
    for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", local_s3.credentials.airflow_connection())
    return env


@pytest.fixture
def s3_bucket(local_s3: LocalS3, s3_env: dict[str, str]) -> str:
    name = f"ckpt-{uuid.uuid4().hex[:12]}"
    local_s3.create_bucket(name)
    return name
