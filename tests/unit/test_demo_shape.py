"""The demo's cluster shape from the environment (``make demo-queue``: 1 fake GPU, a queue of 1 GPU)."""

from __future__ import annotations

from airflow_k8s_ml.testbed.demo import ClusterShape


def test_default_is_no_gpu_and_no_queue() -> None:
    assert ClusterShape.from_env({}) == ClusterShape(gpus=0, gpu_quota=None)


def test_demo_queue_settings() -> None:
    assert ClusterShape.from_env({"DEMO_GPUS": "1", "DEMO_GPU_QUOTA": "1"}) == ClusterShape(1, 1)
    assert ClusterShape.from_env({"DEMO_GPUS": "2", "DEMO_GPU_QUOTA": ""}) == ClusterShape(2, None)
