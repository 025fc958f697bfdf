"""A TrainJob's node evicted mid-run, per what its runtime says (Trainer v2.3's TrainJob cannot set a JobSet
failure policy or a Job pod failure policy itself: ``runtimePatches`` patch pod templates only, so the
runtime decides - docs/operators.md):

- a runtime whose node Job fails on ``DisruptionTarget`` (pod failure policy ``FailJob``, reason
  ``PodFailurePolicy``) and whose JobSet restarts on that reason without counting it
  (``RestartJobSetAndIgnoreMaxRestarts``, JobSet v0.8+ ``failurePolicy.rules``): the gang restarts at once and
  the task succeeds in one attempt, the disruption counted in the XCom;
- a runtime without such rules (``maxRestarts`` 0): the task fails, and the message names the eviction.

Real HTTP: the operator, the trigger, the local cluster's TrainJob, JobSet and Job controllers, the Eviction
API."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.errors import WorkloadFailed
from tests.cluster_fixtures import wait_for

from .test_disruptions import Background, Log, evict
from .test_trainjob_cluster import fail_fast_runtime
from .test_trainjob_operator import nodes
from .training_helpers import execute_until_deferred, make_context, pods
from .trainjob_helpers import GROUP, VERSION, get_jobset

pytestmark = pytest.mark.usefixtures("kube_conn")

NODE_INDEX = "batch.kubernetes.io/job-completion-index"


def resilient_runtime(name: str) -> dict[str, Any]:
    """fail_fast_runtime, plus the two rules that make a disruption a restart of the gang, not a failure."""
    runtime = copy.deepcopy(fail_fast_runtime(name))
    spec = runtime["spec"]["template"]["spec"]
    spec["failurePolicy"] = {
        "maxRestarts": 0,
        "rules": [
            {
                "name": "disruptions",
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
            }
        ],
    }
    job_spec = spec["replicatedJobs"][0]["template"]["spec"]
    job_spec["podFailurePolicy"] = {
        "rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    }
    return runtime


def waiting_code(release: Path) -> str:
    return (
        "import os, pathlib, time\n"
        "print('node', os.environ['PET_NODE_RANK'], 'waiting', flush=True)\n"
        f"while not pathlib.Path({str(release)!r}).exists(): time.sleep(0.2)\n"
        "print('node', os.environ['PET_NODE_RANK'], 'done', flush=True)\n"
    )


def running_node(core: Any, namespace: str, index: str, not_in: set[str]) -> Any:
    return next(
        (
            p
            for p in pods(core, namespace)
            if p.status.phase == "Running"
            and not p.metadata.deletion_timestamp
            and p.metadata.labels.get(NODE_INDEX) == index
            and p.metadata.name not in not_in
        ),
        None,
    )


def test_a_runtime_that_restarts_on_disruption_survives_an_evicted_node(
    custom: Any, core: Any, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "trainingruntimes", resilient_runtime("resilient")
    )
    release = tmp_path / "release"
    op = nodes(
        "tj",
        namespace,
        waiting_code(release),
        runtime="resilient",
        runtime_kind="TrainingRuntime",
        poll_interval=0.5,
    )
    context = make_context("tj")
    waiting = Background(op, execute_until_deferred(op, context), context)

    log = Log(capsys)
    first = wait_for(lambda: running_node(core, namespace, "1", set()), timeout=60, what="node 1 running")
    # the trigger watches the pods (it relays their first lines) before the eviction
    wait_for(lambda: log.has("[node-1] node 1 waiting") and log.has("[node-0] node 0 waiting"), timeout=60)
    evict(core, namespace, first.metadata.name)
    # the JobSet restarts the gang: a new node 1 runs
    wait_for(
        lambda: running_node(core, namespace, "1", {first.metadata.name}), timeout=90, what="node 1 back"
    )
    release.touch()
    waiting.join(timeout=120)
    assert waiting.error is None, f"the run failed: {waiting.error!r}"
    result = waiting.result
    assert result["state"]["phase"] == "succeeded" and result["attempts"] == 1
    reasons = [p["reason"] for p in result["disruptions"]["pods"]]
    assert "EvictionByEvictionAPI" in reasons, result["disruptions"]
    jobset = get_jobset(custom, namespace, result["name"])
    assert jobset["status"]["restarts"] == 1 and not jobset["status"].get("restartsCountTowardsMax")
    assert log.has(f"pod {first.metadata.name} disrupted: EvictionByEvictionAPI")


def test_a_runtime_without_disruption_rules_fails_naming_the_eviction(
    custom: Any, core: Any, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "trainingruntimes", fail_fast_runtime("ff")
    )
    op = nodes(
        "tj",
        namespace,
        waiting_code(tmp_path / "never"),
        runtime="ff",
        runtime_kind="TrainingRuntime",
        poll_interval=0.5,
    )
    context = make_context("tj")
    waiting = Background(op, execute_until_deferred(op, context), context)
    log = Log(capsys)
    node = wait_for(lambda: running_node(core, namespace, "1", set()), timeout=60, what="node 1 running")
    wait_for(lambda: log.has("[node-1] node 1 waiting") and log.has("[node-0] node 0 waiting"), timeout=60)
    evict(core, namespace, node.metadata.name)
    waiting.join(timeout=120)
    assert isinstance(waiting.error, WorkloadFailed), repr(waiting.error)
    message = str(waiting.error)
    assert "(FailedJobs)" in message, message
    first_failure = "first failure: [node-1] disrupted by the cluster (EvictionByEvictionAPI: "
    assert first_failure in message, message
