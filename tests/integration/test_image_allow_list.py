"""An image allow-list on the local cluster (``airflow-k8s-ml local up --allow-image``/``--image-rules``):
an image typo fails as it would on a real cluster. The rules come from the command line's parser and a
rules file, as ``local up`` reads them; an operator whose image is not on the list fails its task with
the kubelet's pull error (containerd's ``NotFound`` wording) and leaves nothing running."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from airflow_k8s_ml.errors import WorkloadFailed
from airflow_k8s_ml.operators import FineTuneJobOperator
from airflow_k8s_ml.testbed.local_cluster.__main__ import add_serve_arguments, options_from
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

from ..cluster_fixtures import fast_settings
from .training_helpers import make_context, run_task, task_log

TYPO = "ghcr.io/me/does-not-exsit:1.0"


def _options(tmp: Path) -> Any:
    """``local up --image-rules rules.json --allow-image 'python:*'`` as the CLI parses it."""
    rules = tmp / "rules.json"
    rules.write_text(json.dumps([{"pattern": "ghcr.io/acme/*", "allow": True, "user": 65532}]))
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return options_from(parser.parse_args(["--image-rules", str(rules), "--allow-image", "python:*"]))


def test_the_rules_come_from_the_file_then_the_allow_list(tmp_path: Path) -> None:
    options = _options(tmp_path)
    patterns = [(rule.pattern, rule.allow, rule.missing) for rule in options.images()]
    assert patterns == [("ghcr.io/acme/*", True, False), ("python:*", True, False), ("*", False, True)]
    assert options.argv()[-4:] == ["--image-rules", str(tmp_path / "rules.json"), "--allow-image", "python:*"]


@pytest.fixture()
def allow_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[client.CoreV1Api]:
    settings = fast_settings(tmp_path / "cluster", images=_options(tmp_path).images())
    with ClusterThread(settings) as running:
        conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(running.kubeconfig_path)}}
        monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(conn))
        api = config.new_client_from_config(config_file=str(running.kubeconfig_path))
        yield client.CoreV1Api(api)
        api.close()


def test_a_typod_image_fails_the_task_with_the_pull_error_and_leaves_nothing(
    allow_listed: client.CoreV1Api, capsys: pytest.CaptureFixture[str]
) -> None:
    allowed = FineTuneJobOperator(
        task_id="ok", namespace="default", image="python:3.11", command=["python", "-c", "print('ran')"]
    )
    assert run_task(allowed, make_context("ok"))["reason"]  # an allow-listed image runs
    typo = FineTuneJobOperator(
        task_id="typo",
        namespace="default",
        image=TYPO,
        command=["python", "-c", "print('never')"],
        startup_timeout=10,
    )
    with pytest.raises(WorkloadFailed) as info:
        run_task(typo, make_context("typo"))
    message = str(info.value)  # the pod's waiting state, as upstream's kubelet words it: the two alternate
    assert (
        f'ImagePullBackOff: Back-off pulling image "{TYPO}"' in message
        or f'ErrImagePull: Failed to pull image "{TYPO}"' in message
    ), message
    # the pull error itself, from the pod's Warning events, in the task log
    assert f'failed to resolve reference "{TYPO}": {TYPO}: not found' in task_log(capsys)
    batch = client.BatchV1Api(allow_listed.api_client)
    typo_jobs = [
        j for j in batch.list_namespaced_job("default").items if j.metadata.name.startswith("training-typo")
    ]
    assert typo_jobs == []
    assert [
        p.metadata.name
        for p in allow_listed.list_namespaced_pod("default").items
        if p.status.phase in ("Pending", "Running")
    ] == []
