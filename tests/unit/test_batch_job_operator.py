"""BatchInferenceJobOperator without a cluster: the Job it would create (env, command, security context, run
labels, the raw-manifest escape hatch) and URI validation - at parse time for static values, in ``execute``
before any API call for templated ones."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.manifests.pod import DEFAULT_CONTAINER_SECURITY_CONTEXT, DEFAULT_POD_SECURITY_CONTEXT
from airflow_k8s_ml.operators import BatchInferenceJobOperator, FineTuneJobOperator

KEY = RunKey("nightly", "score", "scheduled__2024-05-01T00:00:00+00:00")
GOOD: dict[str, Any] = {
    "task_id": "score",
    "image": "digits:1",
    "model_uri": {"uri": "s3://models/digits/step-5/", "step": 5},
    "input_uri": "s3://data/digits/incoming/",
    "output_uri": "s3://data/digits/predictions/2024-05-01/",
}


def operator(**overrides: Any) -> BatchInferenceJobOperator:
    return BatchInferenceJobOperator(**{**GOOD, **overrides})


def render(op: Any, *, attempt: int = 1, namespace: str = "ml") -> dict[str, Any]:
    args = op._arguments(op.manifest)
    key = RunKey(KEY.dag_id, KEY.task_id, KEY.run_id, attempt=attempt)
    return op._render_object(args, op._placement(args, key, namespace, None))


def container(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]["containers"][0]


def env(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


# -- rendering --------------------------------------------------------------------------------------------


def test_the_job_runs_the_reference_workload_with_the_uris_in_its_env() -> None:
    job = render(operator(env={"BATCH_SIZE": 256}, secret_env={"AWS_SECRET_ACCESS_KEY": "s3:secret"}))
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    main = container(job)
    assert main["name"] == "main" and main["image"] == "digits:1"
    assert main["command"] == ["python", "-m", "airflow_k8s_ml.workloads.batch_predict"]
    assert env(main) == {
        "MODEL_URI": "s3://models/digits/step-5/",  # the checkpoint gate's XCom -> its uri
        "INPUT_URI": "s3://data/digits/incoming/",
        "OUTPUT_URI": "s3://data/digits/predictions/2024-05-01/",
        "BATCH_SIZE": "256",
        "AWS_SECRET_ACCESS_KEY": {"secretKeyRef": {"name": "s3", "key": "secret"}},
    }
    assert job["spec"]["backoffLimit"] == 0  # Airflow's retries retry; each try is a new Job
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_restrictive_security_context_by_default_and_replaceable() -> None:
    job = render(operator())
    assert job["spec"]["template"]["spec"]["securityContext"] == dict(DEFAULT_POD_SECURITY_CONTEXT)
    assert container(job)["securityContext"] == dict(DEFAULT_CONTAINER_SECURITY_CONTEXT)
    assert job["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    custom = render(operator(pod_security_context={"runAsUser": 1000, "runAsNonRoot": True}))
    assert custom["spec"]["template"]["spec"]["securityContext"] == {"runAsUser": 1000, "runAsNonRoot": True}


def test_run_labels_on_the_job_and_its_pod_with_the_users_labels() -> None:
    job = render(operator(labels={"team": "ml"}, command=["python", "score.py"], args=["--fast"]), attempt=2)
    meta, pod_meta = job["metadata"], job["spec"]["template"]["metadata"]
    assert meta["name"] == KEY.workload_name("Job").replace("-a1", "-a2") and meta["namespace"] == "ml"
    assert meta["labels"]["team"] == "ml"
    for labels in (meta["labels"], pod_meta["labels"]):
        assert labels["airflow-k8s-ml/dag-id"] == "nightly" and labels["airflow-k8s-ml/task-id"] == "score"
        assert labels["airflow-k8s-ml/attempt"] == "2"
    assert meta["annotations"]["airflow-k8s-ml/run-id"] == KEY.run_id
    assert container(job)["command"] == ["python", "score.py"] and container(job)["args"] == ["--fast"]


def test_pod_and_job_arguments_of_the_training_operators_apply() -> None:
    op = operator(
        requests={"cpu": "2", "memory": "4Gi"},
        gpus=1,
        node_selector={"pool": "gpu"},
        queue_name="batch-queue",
        backoff_limit=1,
        active_deadline_seconds=1800,
        ttl_seconds_after_finished=600,
        namespace="ml",
        run_timeout=3600,
        on_finish="delete_on_success",
    )
    # the fine-tune's runner and Job: submit-or-adopt, deadlines, logs and XCom are the same code
    assert type(op).__mro__[1] is type(FineTuneJobOperator(task_id="ft", image="x:1")).__mro__[1]
    job = render(op)
    assert container(job)["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "batch-queue"
    assert (job["spec"]["suspend"], job["spec"]["backoffLimit"]) == (True, 1)
    assert (job["spec"]["activeDeadlineSeconds"], job["spec"]["ttlSecondsAfterFinished"]) == (1800, 600)


def test_raw_manifest_gets_the_uris_and_no_default_command() -> None:
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "ignored"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "scorer", "image": "digits:1", "env": [{"name": "X", "value": "1"}]}
                    ],
                }
            }
        },
    }
    op = BatchInferenceJobOperator(**{**GOOD, "image": None, "manifest": manifest})
    assert op.command is None
    job = render(op)
    assert env(container(job)) == {
        "MODEL_URI": "s3://models/digits/step-5/",
        "INPUT_URI": "s3://data/digits/incoming/",
        "OUTPUT_URI": "s3://data/digits/predictions/2024-05-01/",
        "X": "1",
    }
    assert job["metadata"]["name"] == KEY.workload_name("Job")


# -- validation -------------------------------------------------------------------------------------------


EXPECTED = "must be an s3://bucket/prefix or file:///abs/path URI"


@pytest.mark.parametrize(
    ("overrides", "field", "says"),
    [
        ({"model_uri": "gs://models/step-5/"}, "model_uri", f"{EXPECTED}, got 'gs://models/step-5/'"),
        ({"model_uri": "/models/step-5"}, "model_uri", EXPECTED),  # bare path: no scheme for the workload
        ({"model_uri": {"step": 5}}, "model_uri", "or the checkpoint gate's XCom with a 'uri'"),
        ({"model_uri": ""}, "model_uri", EXPECTED),
        ({"input_uri": "data/in"}, "input_uri", EXPECTED),
        ({"input_uri": "s3:///no-bucket"}, "input_uri", "has no bucket"),
        ({"input_uri": "file://host/data"}, "input_uri", "file URIs must be local"),
        ({"input_uri": "file:///data/../etc"}, "input_uri", "must not contain '..'"),
        ({"output_uri": "https://bucket/out"}, "output_uri", EXPECTED),
        ({"output_uri": None}, "output_uri", f"{EXPECTED}, got None"),
        ({"output_uri": "s3://data/digits/incoming"}, "output_uri", "must differ from input_uri"),
        ({"output_uri": "gs://b/predictions/{{ ds_nodash }}/"}, "output_uri", EXPECTED),  # static part
        ({"env": {"OUTPUT_URI": "s3://elsewhere/"}}, "env[OUTPUT_URI]", "set by the operator"),
        ({"image": None}, "image", "is required"),
        ({"run_timeout": 0}, "run_timeout", "must be positive"),
    ],
)
def test_bad_static_arguments_fail_at_parse_time_naming_the_field(
    overrides: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(ValidationError) as info:
        operator(**overrides)
    assert info.value.field == field and says in info.value.message


def test_templated_uris_pass_parse_time_and_are_checked_in_execute_before_any_api_call() -> None:
    op = operator(
        model_uri="{{ ti.xcom_pull('gate')['uri'] }}",
        input_uri="{{ var.value.batch_input }}",
        output_uri="s3://data/predictions/{{ ds_nodash }}/",
        kubernetes_conn_id="no_such_connection",  # reaching the API would fail differently
    )
    job = render(op)  # placeholders stand in until execute
    assert env(container(job))["OUTPUT_URI"] == "s3://data/predictions/{{ ds_nodash }}/"
    op.model_uri, op.input_uri, op.output_uri = "s3://m/step-1/", "s3://d/in/", "ftp://d/out/20240501/"
    with pytest.raises(ValidationError) as info:
        op.execute({})  # type: ignore[arg-type]
    assert info.value.field == "output_uri" and "ftp://d/out/20240501/" in info.value.message


def test_an_xcomarg_model_uri_is_resolved_at_run_time() -> None:
    with DAG("batch", schedule=None, start_date=datetime(2024, 1, 1)):
        gate = FineTuneJobOperator(task_id="gate", image="x:1", command=["true"])
        op = operator(model_uri=gate.output)
    assert op.upstream_task_ids == {"gate"}
    assert env(container(render(op)))["MODEL_URI"] == "templated"


def test_template_fields_survive_dag_serialisation() -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    with DAG("batch", schedule=None, start_date=datetime(2024, 1, 1)) as dag:
        operator(output_uri="s3://data/predictions/{{ ds_nodash }}/", env={"RUN": "{{ run_id }}"})
    data = DagSerialization.to_dict(dag)
    json.dumps(data)
    restored = DagSerialization.from_dict(data).get_task("score")
    assert restored.task_type == "BatchInferenceJobOperator"
    for name in ("model_uri", "input_uri", "output_uri", "command", "env", "image"):
        assert name in restored.template_fields
        assert getattr(restored, name) == getattr(dag.get_task("score"), name), name
