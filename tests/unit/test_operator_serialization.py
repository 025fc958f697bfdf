"""Every operator field survives what Airflow does to a task between parse and run: DAG serialisation (the
scheduler/UI copy), deep copies, and the trigger's serialised kwargs (only JSON, only the connection id)."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG
from airflow.serialization.serialized_objects import DagSerialization

from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator, TFJobOperator, TrainJobOperator
from airflow_k8s_ml.operators._adopt import WorkloadRecord
from airflow_k8s_ml.sensors import TrainingJobSensor


def build_dag() -> DAG:
    with DAG("serialise_me", schedule=None, start_date=datetime(2024, 1, 1)) as dag:
        train = FineTuneJobOperator(
            task_id="train",
            image="trainer:1",
            command=["python", "train.py"],
            args=["--resume-from", "{{ resume_from }}"],
            env={"RUN": "{{ run_id }}"},
            namespace="ml",
            resume_from="latest",
            checkpoint_uri="s3://models/{{ dag.dag_id }}",
            deadline="{{ (logical_date + macros.timedelta(hours=6)).isoformat() }}",
            run_timeout=timedelta(hours=6),
            gpus=1,
        )
        ddp = PyTorchJobOperator(task_id="ddp", image="trainer:1", workers=2, namespace="ml")
        nodes = TrainJobOperator(
            task_id="nodes", image="trainer:1", num_nodes="{{ params.workers }}", namespace="ml"
        )
        tf = TFJobOperator(
            task_id="tf", image="trainer:1", workers="{{ params.workers }}", ps=1, namespace="ml"
        )
        wait = TrainingJobSensor(task_id="wait", name="{{ ti.xcom_pull('train')['name'] }}", namespace="ml")
        train >> ddp >> nodes >> tf >> wait
    return dag


def test_template_fields_survive_dag_serialisation() -> None:
    dag = build_dag()
    data = DagSerialization.to_dict(dag)
    json.dumps(data)  # what is stored must be JSON
    restored = DagSerialization.from_dict(data)
    for task_id in ("train", "ddp", "nodes", "tf", "wait"):
        original, copy_ = dag.get_task(task_id), restored.get_task(task_id)
        assert copy_.task_type == type(original).__name__
        assert list(copy_.template_fields) == list(original.template_fields)
        for name in original.template_fields:
            value = getattr(original, name)
            assert getattr(copy_, name) == (str(value) if isinstance(value, timedelta) else value), name
    assert restored.get_task("ddp").upstream_task_ids == {"train"}


def test_operators_survive_deep_copy_with_every_argument() -> None:
    dag = build_dag()
    original: Any = dag.get_task("train")
    clone: Any = copy.deepcopy(original)
    for name in ("image", "args", "env", "gpus", "run_timeout", "resume_from", "checkpoint_uri", "on_finish"):
        assert getattr(clone, name) == getattr(original, name)


def test_trigger_kwargs_are_json_and_carry_no_kubeconfig() -> None:
    op: Any = build_dag().get_task("train")
    op.deadline = "2024-05-01T06:00:00+00:00"  # as rendered
    record = WorkloadRecord("Job", "batch/v1", "train-abc-a1", "ml", "uid-1", 1, 1714521600.0)
    trigger = op._wait_settings().trigger(record, delete_on_kill=True)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_k8s_ml.triggers.workload.WorkloadTrigger"
    assert json.loads(json.dumps(kwargs)) == kwargs
    assert kwargs["kubernetes_conn_id"] == "kubernetes_default" and "kube_config" not in json.dumps(kwargs)
    assert kwargs["deadlines"]["run_timeout"] == 6 * 3600 and kwargs["deadlines"]["deadline"].startswith(
        "2024-05-01T06"
    )
    assert (kwargs["uid"], kwargs["task_started_at"], kwargs["delete_on_kill"]) == (
        "uid-1",
        1714521600.0,
        True,
    )
