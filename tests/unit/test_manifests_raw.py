from __future__ import annotations

import pytest
import yaml

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.manifests.raw import load_manifest, pod_templates, prepare_manifest, strip_status
from airflow_k8s_ml.manifests.training import KUEUE_QUEUE_LABEL

KEY = RunKey("raw_dag", "train", "manual__1")

JOB_YAML = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: from-yaml
  labels:
    team: ml
spec:
  backoffLimit: 1
  template:
    metadata:
      labels:
        app: trainer
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: python:3.11
          command: ["python", "-c", "print(1)"]
"""

PYTORCHJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "pt"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "img"}]}},
            },
            "Worker": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "img"}]}},
            },
        }
    },
}


def test_yaml_file_is_loaded_validated_and_labelled(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(JOB_YAML)
    for source in (path, str(path)):
        obj = prepare_manifest(
            source, namespace="ml", name="raw-job-1", labels=KEY.labels(), annotations=KEY.annotations()
        )
        assert obj["metadata"]["name"] == "raw-job-1"
        assert obj["metadata"]["namespace"] == "ml"
        assert obj["metadata"]["labels"] == {"team": "ml", **KEY.labels()}
        assert obj["metadata"]["annotations"] == KEY.annotations()
        template = obj["spec"]["template"]
        assert template["metadata"]["labels"] == {"app": "trainer", **KEY.labels()}
        assert template["metadata"]["annotations"] == KEY.annotations()
        assert obj["spec"]["backoffLimit"] == 1


def test_yaml_text_and_dicts_are_accepted_and_input_is_not_mutated():
    from_text = prepare_manifest(JOB_YAML, namespace="ml")
    source = yaml.safe_load(JOB_YAML)
    snapshot = yaml.safe_load(JOB_YAML)
    from_dict = prepare_manifest(source, namespace="ml")
    assert from_text == from_dict
    assert source == snapshot


def test_pytorchjob_templates_all_get_labels():
    obj = prepare_manifest(PYTORCHJOB, namespace="ml", labels=KEY.labels())
    paths = [path for path, _ in pod_templates(obj)]
    assert paths == ["spec.pytorchReplicaSpecs.Master.template", "spec.pytorchReplicaSpecs.Worker.template"]
    for _, template in pod_templates(obj):
        assert template["metadata"]["labels"] == KEY.labels()


def test_cronjob_and_deployment_templates_get_labels():
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "cj"},
        "spec": {
            "schedule": "@daily",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}
                    }
                }
            },
        },
    }
    obj = prepare_manifest(cronjob, namespace="ml", labels={"a": "b"})
    assert obj["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"] == {"a": "b"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    obj = prepare_manifest(deployment, namespace="ml", labels={"a": "b"})
    assert obj["spec"]["template"]["metadata"]["labels"] == {"app": "d", "a": "b"}


def test_kueue_label_forces_suspend():
    job = yaml.safe_load(JOB_YAML)
    job["metadata"]["labels"][KUEUE_QUEUE_LABEL] = "team-a"
    assert prepare_manifest(job, namespace="ml")["spec"]["suspend"] is True
    pt = {**PYTORCHJOB, "metadata": {"name": "pt", "labels": {KUEUE_QUEUE_LABEL: "q"}}}
    assert prepare_manifest(pt, namespace="ml")["spec"]["runPolicy"]["suspend"] is True
    job["spec"]["suspend"] = False
    with pytest.raises(ValidationError) as info:
        prepare_manifest(job, namespace="ml")
    assert info.value.field == "manifest.spec.suspend"


def test_strip_status_removes_server_fields():
    live = yaml.safe_load(JOB_YAML)
    live["metadata"].update(
        uid="u",
        resourceVersion="7",
        generation=1,
        creationTimestamp="2024-01-01T00:00:00Z",
        managedFields=[{}],
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "me"},
    )
    live["status"] = {"active": 1}
    clean = strip_status(live)
    assert "status" not in clean
    assert set(clean["metadata"]) == {"name", "labels", "annotations"}
    assert clean["metadata"]["annotations"] == {"keep": "me"}
    assert live["status"] == {"active": 1}  # copy, not in place
    obj = prepare_manifest(live, namespace="ml")
    assert "status" not in obj and "uid" not in obj["metadata"]


def _job(**changes):
    job = yaml.safe_load(JOB_YAML)
    for path, value in changes.items():
        target = job
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return job


DELETE = object()


@pytest.mark.parametrize(
    ("manifest", "kwargs", "field"),
    [
        ({**PYTORCHJOB, "apiVersion": "kubeflow.org/v2"}, {}, "kind"),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, {}, "kind"),
        (_job(), {"kinds": frozenset({("kubeflow.org/v1", "PyTorchJob")})}, "kind"),
        (_job(metadata__name="Bad_Name"), {}, "metadata.name"),
        (_job(metadata__name="j" * 64), {}, "metadata.name"),
        (_job(metadata__name=DELETE), {}, "metadata.name"),
        (_job(), {"name": "Bad"}, "metadata.name"),
        (_job(metadata__generateName="x-"), {}, "metadata.generateName"),
        (_job(metadata__namespace="other"), {"namespace": "ml"}, "metadata.namespace"),
        (_job(), {"namespace": "Bad NS"}, "namespace"),
        (_job(metadata__labels={"team": "a b"}), {}, "metadata.labels[team]"),
        (
            _job(metadata__labels={"airflow-k8s-ml/dag-id": "spoof"}),
            {"labels": KEY.labels()},
            "metadata.labels[airflow-k8s-ml/dag-id]",
        ),
        (_job(spec__template__spec__containers=[]), {}, "spec.template.spec.containers"),
        (
            _job(spec__template__spec__containers__0__image=DELETE),
            {},
            "spec.template.spec.containers[0].image",
        ),
        (_job(spec__template__spec__containers__0__image=""), {}, "spec.template.spec.containers[0].image"),
        (_job(spec__template__spec__containers__0__name=DELETE), {}, "spec.template.spec.containers[0].name"),
        (_job(spec__template__spec__restartPolicy=DELETE), {}, "spec.template.spec.restartPolicy"),
        (_job(spec__template__spec__restartPolicy="Always"), {}, "spec.template.spec.restartPolicy"),
        (_job(spec=DELETE), {}, "spec"),
        (
            {**PYTORCHJOB, "metadata": {"name": "p" * 60}},
            {},
            "metadata.name",
        ),
        (
            {
                **PYTORCHJOB,
                "spec": {
                    "pytorchReplicaSpecs": {"Worker": PYTORCHJOB["spec"]["pytorchReplicaSpecs"]["Worker"]}
                },
            },
            {},
            "spec.pytorchReplicaSpecs",
        ),
        (
            {
                **PYTORCHJOB,
                "spec": {"pytorchReplicaSpecs": {**PYTORCHJOB["spec"]["pytorchReplicaSpecs"], "Chief": {}}},
            },
            {},
            "spec.pytorchReplicaSpecs",
        ),
        (
            {
                **PYTORCHJOB,
                "spec": {
                    "pytorchReplicaSpecs": {
                        "Master": {
                            "replicas": 2,
                            **{
                                k: v
                                for k, v in PYTORCHJOB["spec"]["pytorchReplicaSpecs"]["Master"].items()
                                if k != "replicas"
                            },
                        }
                    }
                },
            },
            {},
            "spec.pytorchReplicaSpecs.Master.replicas",
        ),
        (
            {
                **PYTORCHJOB,
                "spec": {
                    "pytorchReplicaSpecs": {
                        "Master": {"template": {"spec": {"containers": [{"name": "main", "image": "i"}]}}}
                    }
                },
            },
            {},
            "spec.pytorchReplicaSpecs.Master.template.spec.containers",
        ),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "c"},
                "spec": {"schedule": "TZ=UTC @daily"},
            },
            {},
            "spec.schedule",
        ),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "c"},
                "spec": {"schedule": "@daily", "timeZone": "Nowhere/X"},
            },
            {},
            "spec.timeZone",
        ),
    ],
)
def test_invalid_raw_manifests(manifest, kwargs, field):
    """A path inside the manifest is named after the argument (``manifest.``); the operator's own
    ``namespace`` keeps its name."""
    with pytest.raises(ValidationError) as info:
        prepare_manifest(manifest, **kwargs)
    assert info.value.field == (field if field == "namespace" else f"manifest.{field}"), str(info.value)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ ds }}\n", "Jinja"),
        ("a: [1\n", "invalid YAML"),
        ("apiVersion: v1\nkind: Service\n---\napiVersion: v1\nkind: Service\n", "exactly one"),
        ("- a\n- b\n", "mapping"),
        ("", "exactly one"),
    ],
)
def test_load_manifest_errors(text, match):
    with pytest.raises(ValidationError, match=match) as info:
        load_manifest(text)
    assert info.value.field == "manifest"


def test_missing_file(tmp_path):
    with pytest.raises(ValidationError, match="cannot read") as info:
        load_manifest(str(tmp_path / "missing.yaml"))
    assert info.value.field == "manifest"


def test_service_passes_without_pod_templates():
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "svc"},
        "spec": {"ports": [{"port": 80}]},
    }
    out = prepare_manifest(svc, namespace="ml", labels={"a": "b"})
    assert out["metadata"]["labels"] == {"a": "b"}
    with pytest.raises(ValidationError):
        prepare_manifest({**svc, "metadata": {"name": "9svc"}}, namespace="ml")
