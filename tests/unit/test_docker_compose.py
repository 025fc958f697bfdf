"""docker-compose.yaml checked statically (no container engine here): services, images, mounts and the
connection wiring the nightly DAG relies on."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
SERVICES = COMPOSE["services"]


def test_the_stack_has_every_component() -> None:
    expected = {
        "postgres",
        "minio",
        "k3s",
        "bootstrap",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
    }
    assert expected <= set(SERVICES)
    assert SERVICES["k3s"]["image"].startswith("rancher/k3s:")
    assert SERVICES["minio"]["image"].startswith("minio/minio")
    assert SERVICES["postgres"]["image"].startswith("postgres:")
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        assert SERVICES[name]["image"].startswith("apache/airflow:3.")


def test_airflow_mounts_dags_and_installs_the_package() -> None:
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        service = SERVICES[name]
        assert "./dags:/opt/airflow/dags" in service["volumes"]
        assert any(v.startswith("./:/opt/airflow-k8s-ml") for v in service["volumes"])
        assert service["environment"]["_PIP_ADDITIONAL_REQUIREMENTS"] == "/opt/airflow-k8s-ml"
        assert service["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres/airflow")
        assert service["depends_on"]["bootstrap"]["condition"] == "service_completed_successfully"
    assert (ROOT / "dags").is_dir()


def test_bootstrap_installs_the_training_operator_and_creates_connections() -> None:
    script = "\n".join(SERVICES["bootstrap"]["command"])
    assert "kubeflow/training-operator" in script
    assert "connections add kubernetes_default" in script and "kube_config_path" in script
    assert "connections add aws_default" in script and "http://minio:9000" in script
    assert "docs/deploy/rbac.yaml" in script and (ROOT / "docs/deploy/rbac.yaml").exists()
    assert {"postgres", "minio", "k3s"} <= set(SERVICES["bootstrap"]["depends_on"])


def test_rbac_manifest_is_minimal_and_namespaced() -> None:
    docs = list(yaml.safe_load_all((ROOT / "docs/deploy/rbac.yaml").read_text()))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding"]
    verbs = {v for rule in docs[1]["rules"] for v in rule["verbs"]}
    assert "*" not in verbs and "escalate" not in verbs and "bind" not in verbs


def test_the_scaled_setup_celery_on_redis_two_schedulers_triggerers_and_workers() -> None:
    """As issue 25 asks of the compose stack: CeleryExecutor on Redis, two triggerers, a shared logs volume
    (the API server reads trigger logs from it; a trigger resuming on the other triggerer reads it too)."""
    env = COMPOSE["x-airflow-common"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://redis:")
    assert SERVICES["redis"]["image"].startswith("redis:")
    for name in ("airflow-scheduler", "airflow-triggerer", "airflow-worker"):
        assert SERVICES[name]["deploy"]["replicas"] == 2, name
    assert SERVICES["airflow-worker"]["command"] == "celery worker"
    airflow = [n for n, s in SERVICES.items() if str(s.get("image", "")).startswith("apache/airflow")]
    for name in set(airflow) - {"bootstrap"}:
        assert "airflow-logs:/opt/airflow/logs" in SERVICES[name]["volumes"], name
        assert SERVICES[name]["depends_on"]["redis"]["condition"] == "service_healthy", name
