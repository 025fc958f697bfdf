"""The import rule that keeps DAG parsing cheap, checked in a fresh interpreter: importing the package, its
operators and sensors, and building a DAG with each operator and sensor, must not import the Kubernetes
clients, aiohttp, boto3/botocore or torch (those load inside ``execute`` and the triggers), nor the typed
spec modules (their dataclasses cost code generation in every dag-processor fork; ``execute`` renders).

The UI plugin is imported by every Airflow process that loads plugins (workers, the dag processor), so the
plugin module, the extra links and the provider metadata obey the same rule, and none of them may pull in
FastAPI or the plugin's app (those load in the api-server only)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("kubernetes", "kubernetes_asyncio", "aiohttp", "boto3", "botocore", "torch")
#: What only the api-server may load: the plugin's FastAPI app and what it reads with.
UI_ONLY = ("fastapi", "airflow_k8s_ml.ui.app", "airflow_k8s_ml.ui.facts", "airflow_k8s_ml.ui.history")

BUILD_DAG = """
import sys
from datetime import datetime, timedelta

import airflow_k8s_ml, airflow_k8s_ml.operators, airflow_k8s_ml.sensors
from airflow.sdk import DAG
from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator
from airflow_k8s_ml.sensors import TrainingJobSensor

with DAG("rule", schedule=None, start_date=datetime(2024, 1, 1)):
    FineTuneJobOperator(
        task_id="ft", image="trainer:1", command=["python", "train.py"], args=["{{ resume_from }}"],
        gpus=1, resume_from="latest", checkpoint_uri="s3://models/ft", run_timeout=timedelta(hours=1),
        manifest=None, on_finish="delete_on_success",
    )
    FineTuneJobOperator(task_id="raw", manifest={
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "m", "image": "x:1"}],
        }}},
    })
    PyTorchJobOperator(task_id="ddp", image="trainer:1", workers=2, queue_name="gpu")
    TrainingJobSensor(task_id="wait", name="ft-abc", kind="PyTorchJob", admission_timeout=60)
EXPORTS
print(",".join(sorted(name for name in HEAVY if name in sys.modules)))
"""


def heavy_modules_after(script: str) -> str:
    code = f"HEAVY = {HEAVY!r}\n" + script
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def test_parsing_a_dag_with_our_operators_imports_no_heavy_client() -> None:
    assert heavy_modules_after(BUILD_DAG.replace("EXPORTS", "")) == ""


def test_every_lazy_export_resolves_without_heavy_clients() -> None:
    resolve = (
        "for module in (airflow_k8s_ml.operators, airflow_k8s_ml.sensors):\n"
        "    for name in module.__all__:\n"
        "        getattr(module, name)\n"
    )
    assert heavy_modules_after(BUILD_DAG.replace("EXPORTS", resolve)) == ""


PARSE_ONE_OPERATOR = """
import sys
from datetime import datetime, timedelta

from airflow.sdk import DAG
from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator

with DAG("rule", schedule=None, start_date=datetime(2024, 1, 1)):
    FineTuneJobOperator(
        task_id="ft", image="trainer:1", command=["python", "train.py"], args=["{{ resume_from }}"],
        requests={"cpu": "4", "memory": "16Gi"}, gpus=1, tolerations=[{"operator": "Exists"}],
        volumes=[{"name": "data", "mount_path": "/data", "pvc": "datasets"}], run_timeout=timedelta(hours=1),
    )
    PyTorchJobOperator(task_id="ddp", image="trainer:1", workers=2, queue_name="gpu")
print(",".join(sorted(name for name in sys.modules if name.startswith("airflow_k8s_ml."))))
"""


def test_parse_time_checks_do_not_import_the_typed_spec_modules() -> None:
    """The dag processor re-imports our modules in every parse fork, so the parse-time checks run the rules
    functions; the dataclass-heavy spec modules (and the run identity) load only when ``execute`` renders."""
    loaded = set(heavy_modules_after(PARSE_ONE_OPERATOR).split(","))
    assert "airflow_k8s_ml.manifests.pod_rules" in loaded  # the check did run
    spec_modules = {f"airflow_k8s_ml.manifests.{name}" for name in ("pod", "training", "naming")}
    assert loaded & spec_modules == set()


PLUGIN_AND_LINKS = """
import sys
from datetime import datetime

from airflow.sdk import DAG
from airflow_k8s_ml.operators import CheckpointCheckOperator, FineTuneJobOperator, InferenceDeploymentOperator
from airflow_k8s_ml.operators.links import ApprovedCheckpointLink, ClusterDashboardLink, InferenceServiceLink
from airflow_k8s_ml.provider import get_provider_info
from airflow_k8s_ml.ui.plugin import AirflowK8sMLPlugin

get_provider_info()
AirflowK8sMLPlugin().external_views
with DAG("rule", schedule=None, start_date=datetime(2024, 1, 1)):
    FineTuneJobOperator(task_id="ft", image="trainer:1", checkpoint_uri="s3://models/ft")
    CheckpointCheckOperator(task_id="gate", base_uri="s3://models/ft", metric_rules={"loss": "< 1"})
    InferenceDeploymentOperator(task_id="deploy", name="m", model_uri="s3://models/ft/step-1/", image="s:1")
print(",".join(sorted(name for name in (*HEAVY, *UI_ONLY) if name in sys.modules)))
"""


def test_plugin_links_and_provider_info_import_nothing_heavy() -> None:
    code = f"UI_ONLY = {UI_ONLY!r}\n" + PLUGIN_AND_LINKS
    assert heavy_modules_after(code) == ""


def test_parsing_the_nightly_dag_loads_nothing_of_the_ui() -> None:
    from pathlib import Path

    dag_file = Path(__file__).resolve().parents[2] / "dags" / "nightly_finetune.py"
    code = (
        f"UI_ONLY = {UI_ONLY!r}\nimport runpy, sys\nrunpy.run_path({str(dag_file)!r})\n"
        "print(','.join(sorted(n for n in (*HEAVY, *UI_ONLY) if n in sys.modules)))\n"
    )
    assert heavy_modules_after(code) == ""


#: One construction per public operator and sensor, with the arguments that exercise its parse-time checks.
#: ``test_every_operator_and_sensor_has_a_case`` keeps this list complete as operators are added.
CONSTRUCT: dict[str, str] = {
    "FineTuneJobOperator": (
        "FineTuneJobOperator(task_id='t', image='trainer:1', command=['python', 'train.py'], gpus=1,"
        " requests={'cpu': '4', 'memory': '16Gi'}, resume_from='latest', checkpoint_uri='s3://m/ft',"
        " deadline=timedelta(hours=2))"
    ),
    "PyTorchJobOperator": "PyTorchJobOperator(task_id='t', image='trainer:1', workers=2, queue_name='gpu')",
    "TFJobOperator": (
        "TFJobOperator(task_id='t', image='trainer:1', workers='{{ params.workers }}', ps=1,"
        " success_policy='', clean_pod_policy='Running')"
    ),
    "TrainJobOperator": (
        "TrainJobOperator(task_id='t', image='trainer:1', num_nodes='{{ params.workers }}',"
        " resources_per_node={'cpu': '2', 'nvidia.com/gpu': 1}, queue_name='gpu', shm_size='1Gi',"
        " dataset_initializer={'storage_uri': 'hf://org/data'}, checkpoint_uri='s3://m/ft')"
    ),
    "BatchInferenceJobOperator": (
        "BatchInferenceJobOperator(task_id='t', model_uri='s3://m/step-1/', input_uri='s3://d/in/',"
        " output_uri='s3://d/out/{{ ds_nodash }}/', image='scorer:1')"
    ),
    "BatchInferenceCronJobOperator": (
        "BatchInferenceCronJobOperator(task_id='t', name='scores', schedule='0 3 * * *',"
        " time_zone='Europe/Amsterdam', model_uri='s3://m/step-1/', input_uri='s3://d/in/',"
        " output_uri='s3://d/out/', image='scorer:1', requests={'cpu': '1'}, run_now=True)"
    ),
    "CheckpointCheckOperator": (
        "CheckpointCheckOperator(task_id='t', base_uri='s3://m/ft', metric_rules={'loss': '< 1'},"
        " verify='full', allow_older=True)"
    ),
    "InferenceDeploymentOperator": (
        "InferenceDeploymentOperator(task_id='t', name='digits', model_uri='s3://m/step-1/', image='s:1',"
        " requests={'cpu': '250m'},"
        " autoscaling={'min_replicas': 2, 'max_replicas': 4, 'target_cpu_utilization': 70},"
        " pdb_min_available=1, network_policy={'from_namespaces': ['airflow']},"
        " deployment_options={'max_surge': '25%'}, smoke_path='{{ params.p }}', smoke_request={'x': 1})"
    ),
    "CheckpointSensor": (
        "CheckpointSensor(task_id='t', base_uri='s3://m/ft', newer_than_step=3, deadline=timedelta(hours=1))"
    ),
    "TrainingJobSensor": (
        "TrainingJobSensor(task_id='t', name='ft-abc', kind='PyTorchJob', admission_timeout=60)"
    ),
}

CONSTRUCT_ONE = """
import sys
from datetime import datetime, timedelta

from airflow.sdk import DAG
from airflow_k8s_ml.{package} import {name}

with DAG("rule", schedule=None, start_date=datetime(2024, 1, 1)):
    {construct}
print(";".join((
    ",".join(sorted(n for n in HEAVY if n in sys.modules)),
    ",".join(sorted(n for n in sys.modules if n.startswith("airflow_k8s_ml."))),
)))
"""
#: What only ``execute`` (or the triggerer) may load: the typed specs and the run identity, the checkpoint
#: store and manifest (dataclass modules, which cost code generation in every dag-processor fork), the wait
#: decision and the triggers.
EXECUTE_ONLY = {
    *(
        f"airflow_k8s_ml.manifests.{name}"
        for name in ("pod", "training", "trainjob", "tfjob", "serving", "batch", "naming")
    ),
    *(f"airflow_k8s_ml.checkpoints.{name}" for name in ("store", "manifest")),
}
EXECUTE_ONLY_PACKAGES = ("airflow_k8s_ml.triggers", "airflow_k8s_ml.status")


def test_every_operator_and_sensor_has_a_case() -> None:
    import airflow_k8s_ml.operators
    import airflow_k8s_ml.sensors

    assert set(CONSTRUCT) == {*airflow_k8s_ml.operators.__all__, *airflow_k8s_ml.sensors.__all__}


@pytest.mark.parametrize("name", sorted(CONSTRUCT))
def test_each_operator_and_sensor_parses_without_heavy_modules_or_specs(name: str) -> None:
    """In a fresh interpreter, importing one operator (or sensor) and building it in a DAG imports no
    Kubernetes client, aiohttp, boto3/botocore or torch, and nothing only ``execute`` needs."""
    import airflow_k8s_ml.operators

    package = "operators" if name in airflow_k8s_ml.operators.__all__ else "sensors"
    script = CONSTRUCT_ONE.format(package=package, name=name, construct=CONSTRUCT[name])
    heavy, loaded = heavy_modules_after(script).split(";")
    assert heavy == ""
    modules = set(loaded.split(","))
    assert modules & EXECUTE_ONLY == set()
    assert [m for m in modules if m.startswith(EXECUTE_ONLY_PACKAGES)] == []


DECORATED = """
import sys
from airflow.sdk import DAG, task

with DAG("rule", schedule=None):
    @task.{decorator}(image="trainer:1", gpus=1, run_timeout=3600, checkpoint_uri="s3://m/ft",
                      resume_from="latest")
    def train(steps: int, resume_from=None) -> dict:
        import torch  # inside the function: runs in the pod, never at parse time
        return {{"steps": steps}}
    train(3)
print(";".join((
    ",".join(sorted(n for n in HEAVY if n in sys.modules)),
    ",".join(sorted(n for n in sys.modules if n.startswith("airflow_k8s_ml."))),
)))
"""


@pytest.mark.parametrize("decorator", ["finetune_job", "pytorch_job", "train_job"])
def test_each_task_decorator_parses_without_heavy_modules_or_specs(decorator: str) -> None:
    """``@task.finetune_job`` / ``@task.pytorch_job`` / ``@task.train_job``, found through the provider
    metadata as a DAG file finds them, obey the operators' rule: no heavy client, nothing only ``execute``
    needs."""
    heavy, loaded = heavy_modules_after(DECORATED.format(decorator=decorator)).split(";")
    assert heavy == ""
    modules = set(loaded.split(","))
    assert "airflow_k8s_ml.decorators.training" in modules
    assert modules & EXECUTE_ONLY == set()
    assert [m for m in modules if m.startswith(EXECUTE_ONLY_PACKAGES)] == []
