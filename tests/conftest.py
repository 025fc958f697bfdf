"""Shared fixtures: the local cluster (tests/cluster_fixtures.py) and local S3 (tests/s3_fixtures.py)."""

import importlib.util
import os

# The hold after a deferral (``min_deferral_seconds`` against an Airflow 3.3 scheduler race: see
# airflow_k8s_ml/config.py) guards a real scheduler; the in-process tests drive the triggers themselves,
# where it would only add seconds to every quick deferral. The production tier's Airflow keeps the default
# (its stack drops AIRFLOW* variables), and test_workload_trigger.py tests the hold itself.
os.environ.setdefault("AIRFLOW__AIRFLOW_K8S_ML__MIN_DEFERRAL_SECONDS", "0")

pytest_plugins = ["tests.cluster_fixtures", "tests.upstream_schemas_plugin"] + (
    ["tests.s3_fixtures"] if importlib.util.find_spec("tests.s3_fixtures") else []
)
