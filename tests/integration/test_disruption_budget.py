"""``disruption_budget=True`` on a distributed run: the operator creates a PodDisruptionBudget keeping every
rank, a drain against the running run waits (the Eviction API answers 429 with upstream's message, and
``kubectl drain`` gives up at its timeout with the pods untouched), the run then succeeds, and the budget goes
with the workload (its ownerReference, the garbage collector). Real HTTP: the operator, the trigger, the
local cluster's PyTorchJob controller, Eviction API and kubectl."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.operators import PyTorchJobOperator, TrainJobOperator
from tests.cluster_fixtures import wait_for

from .test_disruptions import Background
from .test_kubectl import kubectl
from .training_helpers import execute_until_deferred, make_context, pods, py

pytestmark = pytest.mark.usefixtures("kube_conn")

LABEL = "training.kubeflow.org/job-name"


def running_ranks(core: Any, namespace: str) -> list[Any]:
    found = [p for p in pods(core, namespace) if p.status.phase == "Running"]
    return found if len(found) == 2 else []


def test_a_drain_waits_for_a_distributed_run_with_a_disruption_budget(
    cluster: Any, core: Any, api_client: Any, namespace: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    code = (
        "import os, pathlib, time\n"
        f"while not pathlib.Path({str(release)!r}).exists(): time.sleep(0.2)\n"
        "print('rank', os.environ['RANK'], 'done', flush=True)\n"
    )
    op = PyTorchJobOperator(
        task_id="ddp",
        namespace=namespace,
        image="python:3.11",
        command=py(code),
        workers=1,
        disruption_budget=True,
        on_finish="delete",
        poll_interval=0.5,
        pod_options={"termination_grace_period_seconds": 1},
    )
    context = make_context("ddp")
    waiting = Background(op, execute_until_deferred(op, context), context)
    policy = client.PolicyV1Api(api_client)
    ranks = wait_for(lambda: running_ranks(core, namespace), timeout=60)
    name = ranks[0].metadata.labels[LABEL]

    [budget] = policy.list_namespaced_pod_disruption_budget(namespace).items
    assert budget.spec.min_available == 2 and budget.spec.selector.match_labels == {LABEL: name}
    [owner] = budget.metadata.owner_references
    assert (owner.kind, owner.name) == ("PyTorchJob", name)
    wait_for(
        lambda: (
            (
                policy.read_namespaced_pod_disruption_budget(budget.metadata.name, namespace).status
            ).current_healthy
            == 2
        ),
        timeout=30,
    )

    eviction = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=ranks[0].metadata.name, namespace=namespace)
    )
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod_eviction(ranks[0].metadata.name, namespace, eviction)
    assert refused.value.status == 429
    assert json.loads(refused.value.body)["message"] == (
        "Cannot evict pod as it would violate the pod's disruption budget."
    )

    if shutil.which("kubectl") is not None:  # a drain as an operator types it (CI installs kubectl)
        node = ranks[0].spec.node_name
        try:
            drained = kubectl(
                cluster,
                tmp_path,
                "drain",
                node,
                f"--pod-selector={LABEL}={name}",
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--timeout=6s",
                check=False,
            )
        finally:
            kubectl(cluster, tmp_path, "uncordon", node)
        assert drained.returncode != 0, drained.stdout + drained.stderr
        assert "violate the pod's disruption budget" in drained.stderr, drained.stderr
    still = running_ranks(core, namespace)
    assert sorted(p.metadata.uid for p in still) == sorted(p.metadata.uid for p in ranks)  # none evicted

    release.touch()
    waiting.join(timeout=120)
    assert waiting.error is None, f"the run failed: {waiting.error!r}"
    assert waiting.result["state"]["phase"] == "succeeded"
    assert waiting.result["disruptions"]["count"] == 0
    wait_for(lambda: not policy.list_namespaced_pod_disruption_budget(namespace).items, timeout=30)


def test_a_trainjob_budget_needs_num_nodes_and_nothing_is_created_without_it(
    custom: Any, namespace: str
) -> None:
    op = TrainJobOperator(
        task_id="tj", namespace=namespace, image="python:3.11", command=py("pass"), disruption_budget=True
    )
    with pytest.raises(ValidationError, match="disruption_budget: needs num_nodes"):
        op.execute(make_context("tj"))
    trainjobs = custom.list_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs"
    )
    assert trainjobs["items"] == []
