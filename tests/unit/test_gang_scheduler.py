"""Volcano gang scheduling rendered on Jobs and PyTorchJobs (manifests/gang.py and the operators' option)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.gang import volcano_podgroup, with_gang_scheduler
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator

KEY = RunKey("nightly", "finetune", "scheduled__2024-05-01T00:00:00+00:00")


def render(op: Any) -> dict[str, Any]:
    args = op._arguments(op.manifest)
    return op._render_object(args, op._placement(args, KEY, "ml", None))


def test_pytorchjob_gang_names_its_podgroup_and_needs_every_replica() -> None:
    op = PyTorchJobOperator(task_id="ddp", image="trainer:1", workers=2, gpus=1, gang_scheduler="volcano")
    obj = render(op)
    name = obj["metadata"]["name"]
    assert obj["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 3}
    for role in ("Master", "Worker"):
        template = obj["spec"]["pytorchReplicaSpecs"][role]["template"]
        assert template["spec"]["schedulerName"] == "volcano"
        assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == name


def test_job_gets_the_scheduler_only() -> None:
    obj = render(FineTuneJobOperator(task_id="ft", image="trainer:1", gang_scheduler="volcano"))
    template = obj["spec"]["template"]
    assert template["spec"]["schedulerName"] == "volcano"
    assert "scheduling.k8s.io/group-name" not in (template["metadata"].get("annotations") or {})


def test_without_the_option_nothing_changes() -> None:
    obj = render(PyTorchJobOperator(task_id="ddp", image="trainer:1", workers=1))
    assert "schedulingPolicy" not in obj["spec"]["runPolicy"]
    assert "schedulerName" not in obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]


def test_a_set_min_available_is_kept_and_the_input_not_mutated() -> None:
    obj = {
        "kind": "PyTorchJob",
        "metadata": {"name": "pt"},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"minAvailable": 1}},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {}}}},
        },
    }
    out = with_gang_scheduler(obj, "volcano")
    assert out["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 1
    assert obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"] == {"spec": {}}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: FineTuneJobOperator(task_id="a", image="i:1", gang_scheduler="yunikorn"),
            "must be one of volcano",
        ),
        (
            lambda: FineTuneJobOperator(
                task_id="b", image="i:1", gang_scheduler="volcano", scheduler_name="x"
            ),
            "contradicts scheduler_name='x'",
        ),
    ],
)
def test_bad_gang_scheduler_fails_at_parse_time(make: Any, message: str) -> None:
    with pytest.raises(ValidationError, match="gang_scheduler") as info:
        make()
    assert message in str(info.value)


def test_podgroup_rendering() -> None:
    assert volcano_podgroup("pt", "ml", 3, queue="gpu") == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pt", "namespace": "ml"},
        "spec": {"minMember": 3, "queue": "gpu"},
    }
