"""Shared fixtures: the local cluster (tests/cluster_fixtures.py) and local S3 (tests/s3_fixtures.py)."""

import importlib.util

pytest_plugins = ["tests.cluster_fixtures"] + (
    ["tests.s3_fixtures"] if importlib.util.find_spec("tests.s3_fixtures") else []
)
