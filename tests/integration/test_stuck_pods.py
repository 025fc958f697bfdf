"""Stuck pods told when they stick, on the local cluster: each cause the kubelet or the scheduler writes is
named in the task log (well within 30 s: every wait here ends in seconds), the causes waiting cannot heal
fail the task early and leave nothing behind, and a task written with no budget ends within the default
start-up budget (shortened through the provider's option) naming the cause.

The worker's wait (``deferrable=False``) runs most cases; the triggerer's wait (the same report,
:mod:`airflow_k8s_ml.status.wait_report`) runs the image-pull case, revived as the triggerer would.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_k8s_ml.errors import DeadlineExceeded
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.settings import ImageRule
from tests.cluster_fixtures import fast_settings, use_cluster

from .training_helpers import jobs, make_context, py, run_task, task_log

GPU_MESSAGE = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
SLEEP = "import time; time.sleep(30)"


def finetune(task_id: str, namespace: str, code: str, **kwargs: Any) -> Any:
    """A FineTuneJobOperator running ``code`` (the test image unless ``image`` says otherwise)."""
    from airflow_k8s_ml.operators import FineTuneJobOperator

    args = {"image": "python:3.11", "pod_options": {"termination_grace_period_seconds": 2}, **kwargs}
    return FineTuneJobOperator(task_id=task_id, namespace=namespace, command=py(code), **args)


def fails(op: Any, capfd: pytest.CaptureFixture[str]) -> tuple[str, str, float]:
    """Run the task to its failure: (the error, the task log, seconds it took)."""
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as info:
        run_task(op, make_context(op.task_id))
    return str(info.value), task_log(capfd), time.monotonic() - started


def test_an_image_that_cannot_be_pulled_is_named_then_the_startup_budget_ends_it(
    batch: Any, kube_conn: str, namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    op = finetune(
        "pull", namespace, SLEEP, image="forbidden.example/trainer:1", startup_timeout=6, deferrable=False
    )
    error, log, _ = fails(op, capfd)
    assert "is stuck: container main: ErrImagePull: Failed to pull image " in log or (
        'is stuck: container main: ImagePullBackOff: Back-off pulling image "forbidden.example/trainer:1"'
        in log
    ), log
    assert error.startswith("startup_timeout 6s exceeded: ")
    assert jobs(batch, namespace) == []


def test_the_triggerers_wait_names_the_stuck_pod_too(
    batch: Any, kube_conn: str, namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    op = finetune("pull-deferred", namespace, SLEEP, image="forbidden.example/trainer:1", startup_timeout=6)
    error, log, _ = fails(op, capfd)
    assert "is stuck: container main: " in log and "forbidden.example/trainer:1" in log, log
    assert "startup_timeout 6s exceeded" in error
    assert jobs(batch, namespace) == []


def test_an_unschedulable_pod_is_named_with_the_schedulers_message(
    batch: Any, kube_conn: str, namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    op = finetune("gpu", namespace, SLEEP, gpus=1, admission_timeout=5, deferrable=False)
    error, log, _ = fails(op, capfd)
    assert f"is stuck: Unschedulable: {GPU_MESSAGE}" in log, log
    assert error == f"admission_timeout 5s exceeded: {GPU_MESSAGE}"
    assert jobs(batch, namespace) == []


def test_a_volume_that_cannot_be_mounted_is_named_from_the_pods_events(
    batch: Any, kube_conn: str, namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    volume = {"name": "creds", "mount_path": "/creds", "secret": "absent"}
    op = finetune("mount", namespace, SLEEP, volumes=[volume], startup_timeout=8, deferrable=False)
    _, log, _ = fails(op, capfd)
    assert (
        'is stuck: FailedMount: MountVolume.SetUp failed for volume "creds" : secret "absent" not found'
        in log
    )
    assert jobs(batch, namespace) == []


def test_a_crash_loop_is_named_with_its_restarts_and_last_lines(
    batch: Any, kube_conn: str, namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    code = "import sys; print('loading shard 7 failed', flush=True); sys.exit(2)"
    op = finetune(
        "crash",
        namespace,
        code,
        restart_policy="OnFailure",
        backoff_limit=20,
        run_timeout=6,
        deferrable=False,
    )
    with pytest.raises(DeadlineExceeded):
        run_task(op, make_context("crash"))
    log = task_log(capfd)
    assert "is stuck: container main: CrashLoopBackOff: " in log, log
    assert "last exit code 2 (Error)" in log
    assert "  loading shard 7 failed" in log  # the last lines, under the stuck line
    assert jobs(batch, namespace) == []


def test_an_invalid_image_name_fails_at_once_and_leaves_nothing(
    batch: Any, kube_conn: str, namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    op = finetune("bad-name", namespace, SLEEP, image="Trainer:1", deferrable=False)  # no budget given
    error, log, took = fails(op, capfd)
    assert error.startswith("startup_timeout cut short: [")
    assert (
        'InvalidImageName: Failed to apply default image tag "Trainer:1": couldn\'t parse image name '
        '"Trainer:1": invalid reference format: repository name (library/Trainer) must be lowercase'
    ) in error
    assert "is stuck: container main: InvalidImageName" in log
    assert took < 60  # not the 30-minute default start-up budget
    assert jobs(batch, namespace) == []


def test_a_missing_secret_fails_after_its_grace_period(
    batch: Any,
    kube_conn: str,
    namespace: str,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__AIRFLOW_K8S_ML__MISSING_CONFIG_GRACE_SECONDS", "2")
    op = finetune("no-secret", namespace, SLEEP, env_from=["absent"], deferrable=False)
    error, log, _ = fails(op, capfd)
    assert 'is stuck: container main: CreateContainerConfigError: secret "absent" not found' in log, log
    assert error.startswith("startup_timeout cut short: [") and 'secret "absent" not found' in error
    assert jobs(batch, namespace) == []


def test_with_no_budget_argument_the_default_startup_budget_ends_the_wait_naming_the_cause(
    batch: Any,
    kube_conn: str,
    namespace: str,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default is 30 minutes; the option shortens it to 4 s here, the path is the same."""
    monkeypatch.setenv("AIRFLOW__AIRFLOW_K8S_ML__DEFAULT_STARTUP_TIMEOUT", "4")
    op = finetune("defaults", namespace, SLEEP, image="forbidden.example/trainer:1")  # no budget, deferrable
    error, _, _ = fails(op, capfd)
    # the kubelet alternates ErrImagePull (a try) and ImagePullBackOff (the wait before the next): the budget
    # may end in either
    assert error.startswith(
        (
            "startup_timeout 4s exceeded: container main: ImagePullBackOff: ",
            "startup_timeout 4s exceeded: container main: ErrImagePull: ",
        )
    ), error
    assert "forbidden.example/trainer:1" in error
    assert jobs(batch, namespace) == []


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterThread]:
    """A cluster enforcing runAsNonRoot, as a real kubelet does (the shared test cluster only warns), with
    an image that runs as root."""
    settings = fast_settings(
        tmp_path_factory.mktemp("enforcing"),
        run_as_non_root="enforce",
        images=[ImageRule("root.example/*", user=0)],
    )
    with ClusterThread(settings) as running:
        yield running


def test_run_as_non_root_refused_for_the_image_fails_at_once(
    enforcing: ClusterThread, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    use_cluster(monkeypatch, enforcing.kubeconfig_path)
    op = finetune("rooted", "default", SLEEP, image="root.example/trainer:1", deferrable=False)
    error, log, took = fails(op, capfd)
    assert "CreateContainerConfigError: container has runAsNonRoot and image will run as root" in error
    assert "is stuck: container main: CreateContainerConfigError: container has runAsNonRoot" in log
    assert took < 60
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(enforcing.kubeconfig_path))
    try:
        assert client.BatchV1Api(api).list_namespaced_job("default").items == []
        assert client.CoreV1Api(api).list_namespaced_pod("default").items == []
    finally:
        api.close()
