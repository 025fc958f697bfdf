"""kubectl with Kubeflow Trainer v2 and JobSet on the local cluster: apply a TrainJob manifest (strict field
validation through the served OpenAPI), the shipped ClusterTrainingRuntime, and upstream's printer columns
for ``get trainjobs`` and ``get jobsets``."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

from ..cluster_fixtures import wait_for
from .test_kubectl import kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

TRAINJOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: 2
    image: python:3.11
    command: ["python", "-c", "print('hello from', __import__('os').environ['PET_NODE_RANK'])"]
{extra}"""


def _manifest(tmp_path: Path, name: str, extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(TRAINJOB).format(name=name, extra=extra))
    return path


def test_apply_trainjob_and_get_upstream_columns(
    cluster: ClusterThread, namespace: str, tmp_path: Path
) -> None:
    applied = kubectl(cluster, tmp_path, "apply", "-n", namespace, "-f", str(_manifest(tmp_path, "hello")))
    assert applied.stdout.strip() == "trainjob.trainer.kubeflow.org/hello created"

    kubectl(
        cluster,
        tmp_path,
        "wait",
        "-n",
        namespace,
        "--for=condition=Complete",
        "trainjob/hello",
        "--timeout=60s",
    )
    trainjobs = kubectl(cluster, tmp_path, "get", "-n", namespace, "trainjobs").stdout.splitlines()
    assert trainjobs[0].split() == ["NAME", "STATE", "AGE"]
    assert trainjobs[1].split()[:2] == ["hello", "Complete"]

    jobsets = wait_for(
        lambda: kubectl(cluster, tmp_path, "get", "-n", namespace, "jobsets").stdout.splitlines(),
        lambda lines: len(lines) == 2 and "Completed" in lines[1],
        what="jobset listed as Completed",
    )
    assert jobsets[0].split() == ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE"]
    assert jobsets[1].split()[:5] == ["hello", "Completed", "0", "True", "false"]

    runtimes = kubectl(cluster, tmp_path, "get", "clustertrainingruntimes", "-o", "name").stdout.split()
    assert "clustertrainingruntime.trainer.kubeflow.org/torch-distributed" in runtimes
    framework = kubectl(
        cluster,
        tmp_path,
        "get",
        "clustertrainingruntime/torch-distributed",
        "-o",
        "jsonpath={.metadata.labels.trainer\\.kubeflow\\.org/framework}",
    )
    assert framework.stdout == "torch"


def test_apply_refuses_unknown_trainjob_fields(
    cluster: ClusterThread, namespace: str, tmp_path: Path
) -> None:
    manifest = _manifest(tmp_path, "typo", extra="  suspnd: true\n")
    refused = kubectl(cluster, tmp_path, "apply", "-n", namespace, "-f", str(manifest), check=False)
    assert refused.returncode != 0
    assert 'unknown field "spec.suspnd"' in refused.stderr
