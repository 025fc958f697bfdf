"""kubectl, as a user runs it, against the local cluster: apply (created/configured/unchanged), strict
field validation, get, wait, logs -f and delete."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels: {{app: demo}}
spec:
  backoffLimit: 0
  template:
    metadata:
      labels: {{app: demo}}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: python:3.11-slim
        command: ["python", "-c", {code!r}]
{extra}"""


def kubectl(
    cluster: ClusterThread, tmp_path: Path, *args: str, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {"KUBECONFIG": str(cluster.kubeconfig_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stdout}{result.stderr}")
    return result


def _manifest(tmp_path: Path, name: str, code: str, extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(JOB).format(name=name, code=code, extra=extra))
    return path


def test_apply_twice_get_wait_logs_delete(cluster: ClusterThread, namespace: str, tmp_path: Path) -> None:
    code = "import time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.3)"
    manifest = _manifest(tmp_path, "demo", code)
    first = kubectl(cluster, tmp_path, "apply", "-n", namespace, "-f", str(manifest))
    assert first.stdout.strip() == "job.batch/demo created"
    # Re-applying with a changed label is "configured"; the same file again is "unchanged".
    text = manifest.read_text()
    manifest.write_text(text.replace("labels: {app: demo}\nspec:", "labels: {app: demo2}\nspec:", 1))
    second = kubectl(cluster, tmp_path, "apply", "-n", namespace, "-f", str(manifest))
    assert second.stdout.strip() == "job.batch/demo configured"
    third = kubectl(cluster, tmp_path, "apply", "-n", namespace, "-f", str(manifest))
    assert third.stdout.strip() == "job.batch/demo unchanged"

    logs = kubectl(cluster, tmp_path, "logs", "-f", "-n", namespace, "job/demo", timeout=60)
    assert logs.stdout.splitlines() == ["line 0", "line 1", "line 2"]

    kubectl(
        cluster, tmp_path, "wait", "-n", namespace, "--for=condition=complete", "job/demo", "--timeout=60s"
    )
    table = kubectl(cluster, tmp_path, "get", "-n", namespace, "jobs")
    header, row = table.stdout.splitlines()[:2]
    assert header.split()[:3] == ["NAME", "STATUS", "COMPLETIONS"]
    assert row.split()[:3] == ["demo", "Complete", "1/1"]
    pods = kubectl(cluster, tmp_path, "get", "-n", namespace, "pods", "-l", "job-name=demo", "-o", "name")
    assert pods.stdout.startswith("pod/demo-")

    deleted = kubectl(cluster, tmp_path, "delete", "-n", namespace, "job/demo")
    assert deleted.stdout.strip() == 'job.batch "demo" deleted'
    gone = kubectl(cluster, tmp_path, "get", "-n", namespace, "job/demo", check=False)
    assert gone.returncode != 0 and 'jobs.batch "demo" not found' in gone.stderr
    # kubectl deletes with propagationPolicy=Background: the job's pods go too.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = kubectl(cluster, tmp_path, "get", "-n", namespace, "pods", "-l", "job-name=demo", "-o", "name")
        if not left.stdout.strip():
            break
        time.sleep(0.3)
    assert not left.stdout.strip()


def test_apply_rejects_an_unknown_field(cluster: ClusterThread, namespace: str, tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "strict", "print(1)", extra="  foo: bar\n")
    result = kubectl(cluster, tmp_path, "apply", "-n", namespace, "-f", str(manifest), check=False)
    assert result.returncode != 0
    assert 'strict decoding error: unknown field "spec.foo"' in result.stderr
    missing = kubectl(cluster, tmp_path, "get", "-n", namespace, "job/strict", check=False)
    assert missing.returncode != 0


def test_wait_for_failed_job(cluster: ClusterThread, namespace: str, tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "bad", "import sys; sys.exit(2)")
    kubectl(cluster, tmp_path, "apply", "-n", namespace, "-f", str(manifest))
    kubectl(cluster, tmp_path, "wait", "-n", namespace, "--for=condition=failed", "job/bad", "--timeout=60s")
    reason = kubectl(
        cluster,
        tmp_path,
        "get",
        "-n",
        namespace,
        "job/bad",
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Failed')].reason}",
    )
    assert reason.stdout == "BackoffLimitExceeded"


def test_get_shows_wide_columns_only_with_o_wide(
    cluster: ClusterThread, namespace: str, tmp_path: Path
) -> None:
    manifest = _manifest(tmp_path, "wide", "print('hi')")
    kubectl(cluster, tmp_path, "apply", "-n", namespace, "-f", str(manifest))
    kubectl(
        cluster, tmp_path, "wait", "-n", namespace, "--for=condition=complete", "job/wide", "--timeout=60s"
    )
    narrow = kubectl(cluster, tmp_path, "get", "-n", namespace, "pods").stdout.splitlines()
    wide = kubectl(cluster, tmp_path, "get", "-n", namespace, "pods", "-o", "wide").stdout.splitlines()
    assert narrow[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert wide[0].split() == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED",
        "NODE",
        "READINESS",
        "GATES",
    ]
    assert narrow[1].split()[1:4] == ["0/1", "Completed", "0"]
    jobs = kubectl(cluster, tmp_path, "get", "-n", namespace, "jobs", "-o", "wide").stdout.splitlines()
    assert jobs[0].split()[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert jobs[1].split()[-3:-1] == ["main", "python:3.11-slim"]
