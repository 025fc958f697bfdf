"""What the training operators would create (pure render, no cluster): names, run labels on the object and
its pods, injected env, ``{{ resume_from }}``, Kueue, PyTorchJob replicas, the raw-manifest escape hatch."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator

KEY = RunKey("nightly", "finetune", "scheduled__2024-05-01T00:00:00+00:00")


def render(
    op: Any, *, attempt: int = 1, resume_uri: str | None = None, namespace: str = "ml"
) -> dict[str, Any]:
    args = op._arguments(op.manifest)
    key = RunKey(KEY.dag_id, KEY.task_id, KEY.run_id, attempt=attempt)
    return op._render_object(args, op._placement(args, key, namespace, resume_uri))


def container(obj: dict[str, Any], role: str | None = None) -> dict[str, Any]:
    if role is None:
        return obj["spec"]["template"]["spec"]["containers"][0]
    return obj["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]["containers"][0]


def env(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def finetune(**kwargs: Any) -> FineTuneJobOperator:
    return FineTuneJobOperator(
        task_id="finetune", image="trainer:1", command=["python", "train.py"], **kwargs
    )


def test_job_name_labels_and_pod_labels() -> None:
    job = render(finetune(labels={"team": "ml"}), attempt=2)
    meta = job["metadata"]
    assert meta["name"] == KEY.workload_name("Job").replace("-a1", "-a2") and meta["namespace"] == "ml"
    assert meta["labels"]["team"] == "ml" and meta["labels"]["airflow-k8s-ml/attempt"] == "2"
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["airflow-k8s-ml/task-id"] == "finetune" and pod_labels["airflow-k8s-ml/attempt"] == "2"
    assert meta["annotations"]["airflow-k8s-ml/run-id"] == KEY.run_id  # the exact value, unsanitised
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_pod_arguments_reach_the_container() -> None:
    op = finetune(
        env={"EPOCHS": 3},
        secret_env={"HF_TOKEN": "hf:token"},
        env_from=["s3-credentials"],
        requests={"cpu": "2", "memory": "8Gi"},
        gpus=1,
        gpu_resource="nvidia.com/mig-1g.5gb",
        node_selector={"pool": "gpu"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        image_pull_secrets=["registry"],
        volumes=[{"name": "data", "mount_path": "/data", "pvc": "datasets", "read_only": True}],
        service_account="trainer",
        scheduler_name="volcano",
        container_security_context={"runAsUser": 1000},
        shm_size="2Gi",
        pod_options={"working_dir": "/work"},
        active_deadline_seconds=3600,
        ttl_seconds_after_finished=600,
    )
    job = render(op)
    pod, main = job["spec"]["template"]["spec"], container(job)
    assert env(main)["EPOCHS"] == "3"
    assert env(main)["HF_TOKEN"] == {"secretKeyRef": {"name": "hf", "key": "token"}}
    assert main["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
    assert main["resources"]["limits"]["nvidia.com/mig-1g.5gb"] == "1"
    assert main["resources"]["requests"]["memory"] == "8Gi"
    assert main["securityContext"] == {"runAsUser": 1000} and main["workingDir"] == "/work"
    assert pod["securityContext"]["runAsNonRoot"] is True  # restrictive pod default kept
    assert pod["nodeSelector"] == {"pool": "gpu"} and pod["schedulerName"] == "volcano"
    assert pod["serviceAccountName"] == "trainer" and pod["imagePullSecrets"] == [{"name": "registry"}]
    assert {v["name"] for v in pod["volumes"]} == {"data", "dshm"}
    assert (job["spec"]["activeDeadlineSeconds"], job["spec"]["ttlSecondsAfterFinished"]) == (3600, 600)


def test_checkpoint_and_resume_are_injected() -> None:
    op = finetune(
        args=["--resume-from", "{{ resume_from }}"], resume_from="latest", checkpoint_uri="s3://models/ft"
    )
    fresh = render(op)
    assert env(container(fresh)) == {"CHECKPOINT_URI": "s3://models/ft"}
    assert container(fresh)["args"] == ["--resume-from", ""]
    resumed = render(op, attempt=2, resume_uri="s3://models/ft/step-7/")
    assert env(container(resumed)) == {
        "CHECKPOINT_URI": "s3://models/ft",
        "RESUME_FROM": "s3://models/ft/step-7/",
    }
    assert container(resumed)["args"] == ["--resume-from", "s3://models/ft/step-7/"]
    assert resumed["metadata"]["annotations"]["airflow-k8s-ml/resumed-from"] == "s3://models/ft/step-7/"


def test_kueue_queue_label_and_suspend() -> None:
    job = render(finetune(queue_name="gpu-queue"))
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert job["spec"]["suspend"] is True


def test_pytorchjob_master_and_workers_share_the_pod() -> None:
    op = PyTorchJobOperator(
        task_id="ddp",
        image="trainer:1",
        command=["torchrun", "train.py"],
        workers=3,
        gpus=1,
        clean_pod_policy="Running",
        backoff_limit=2,
        checkpoint_uri="s3://models/ddp",
    )
    job = render(op)
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PyTorchJob"
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 3)
    for role in ("Master", "Worker"):
        assert container(job, role)["name"] == "pytorch"
        assert env(container(job, role))["CHECKPOINT_URI"] == "s3://models/ddp"
        labels = replicas[role]["template"]["metadata"]["labels"]
        assert labels["airflow-k8s-ml/task-id"] == "finetune"  # the run key of this render
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 2}


def test_raw_manifest_dict_is_named_labelled_and_injected() -> None:
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hand-written", "labels": {"owner": "data"}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "x:1", "args": ["--from={{ resume_from }}"]}],
                }
            }
        },
    }
    op = FineTuneJobOperator(
        task_id="raw", manifest=manifest, checkpoint_uri="file:///ckpt", resume_from="latest"
    )
    job = render(op, resume_uri="file:///ckpt/step-1/")
    assert (
        job["metadata"]["name"] == KEY.workload_name("Job") and job["metadata"]["labels"]["owner"] == "data"
    )
    assert job["spec"]["template"]["metadata"]["labels"]["airflow-k8s-ml/dag-id"] == "nightly"
    main = container(job)
    assert env(main) == {"CHECKPOINT_URI": "file:///ckpt", "RESUME_FROM": "file:///ckpt/step-1/"}
    assert main["args"] == ["--from=file:///ckpt/step-1/"]
    assert manifest["metadata"]["name"] == "hand-written"  # the user's dict is not mutated


def test_airflow_rendering_keeps_the_resume_placeholder_for_launch(tmp_path: Any) -> None:
    from datetime import datetime

    from airflow.sdk import DAG

    with DAG("render", schedule=None, start_date=datetime(2024, 1, 1)):
        op = finetune(
            args=["--run", "{{ run_id }}", "--resume-from", "{{ resume_from }}"],
            env={"LR": "{{ params.lr }}"},
        )
    op.render_template_fields({"run_id": "manual__1", "params": {"lr": "0.01"}})  # type: ignore[arg-type]
    assert op.args == ["--run", "manual__1", "--resume-from", "{{ resume_from }}"]
    assert op.env == {"LR": "0.01"}
    assert container(render(op, resume_uri="s3://b/step-3/"))["args"][-1] == "s3://b/step-3/"


def test_a_manifest_file_is_rendered_with_the_context_at_execute(tmp_path: Any) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("metadata: {name: '{{ params.name }}'}\nargs: ['{{ resume_from }}']\n")
    op = FineTuneJobOperator(task_id="raw", manifest=str(path))  # Jinja inside: not validated at parse time
    text = op._manifest_source(str(path), {"params": {"name": "from-params"}})
    assert text == "metadata: {name: 'from-params'}\nargs: ['{{ resume_from }}']"


def test_queue_name_is_templated_and_empty_means_not_queued() -> None:
    from datetime import datetime

    from airflow.sdk import DAG

    with DAG("render-queue", schedule=None, start_date=datetime(2024, 1, 1)):
        queued = finetune(queue_name="{{ params.queue }}")
        plain = FineTuneJobOperator(task_id="plain", image="trainer:1", queue_name="{{ params.queue }}")
    queued.render_template_fields({"params": {"queue": "gpu"}})  # type: ignore[arg-type]
    plain.render_template_fields({"params": {"queue": ""}})  # type: ignore[arg-type]
    job = render(queued)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu" and job["spec"]["suspend"] is True
    job = render(plain)
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"] and not job["spec"].get("suspend")
