from __future__ import annotations

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.pod import (
    PodTemplate,
    Toleration,
    Volume,
    build_pod_template,
    gpu_toleration,
    pod_security_context,
    spot_node_selector,
    spot_tolerations,
)


def container(template):
    return template["spec"]["containers"][0]


def test_minimal_pod_has_restrictive_security_defaults():
    tpl = build_pod_template(PodTemplate(image="python:3.11"), restart_policy="Never")
    assert tpl["spec"]["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container(tpl)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert "readOnlyRootFilesystem" not in container(tpl)["securityContext"]
    assert tpl["spec"]["restartPolicy"] == "Never"
    assert container(tpl) == {
        "name": "main",
        "image": "python:3.11",
        "securityContext": container(tpl)["securityContext"],
    }


def test_security_context_is_overridable():
    pod = PodTemplate(
        image="pytorch/pytorch:2.3",
        pod_security_context=pod_security_context(run_as_user=1000, fs_group=1000),
        container_security_context={},
    )
    tpl = build_pod_template(pod)
    assert tpl["spec"]["securityContext"]["runAsUser"] == 1000
    assert tpl["spec"]["securityContext"]["fsGroup"] == 1000
    assert tpl["spec"]["securityContext"]["runAsNonRoot"] is True
    assert "securityContext" not in container(tpl)
    tpl = build_pod_template(PodTemplate(image="x", pod_security_context={}))
    assert "securityContext" not in tpl["spec"]


def test_full_pod():
    pod = PodTemplate(
        image="ghcr.io/acme/train:1.2",
        command=["python", "-m", "train"],
        args=["--epochs", "3"],
        working_dir="/app",
        env={"EPOCHS": 3, "LR": 0.001, "NAME": "x"},
        secret_env={"HF_TOKEN": "hf-secret:token"},
        config_map_env={"CFG": "train-config:cfg.yaml"},
        field_env={"POD_NAME": "metadata.name"},
        env_from_secrets=["aws-creds"],
        env_from_config_maps=["common"],
        requests={"cpu": "4", "memory": "16Gi"},
        limits={"memory": "16Gi"},
        gpus=2,
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-l4"},
        tolerations=[
            *spot_tolerations("gke"),
            gpu_toleration(),
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        ],
        image_pull_secrets=["regcred"],
        image_pull_policy="IfNotPresent",
        volumes=[
            Volume(name="ckpt", mount_path="/ckpt", pvc="ckpt-pvc"),
            {"name": "cache", "mountPath": "/cache", "emptyDir": True, "sizeLimit": "10Gi"},
            Volume(name="cfg", mount_path="/etc/cfg", config_map="train-config", read_only=True),
            Volume(
                name="creds", mount_path="/etc/creds", secret="gcs-key", read_only=True, sub_path="key.json"
            ),
        ],
        shm_size="8Gi",
        service_account="trainer",
        scheduler_name="volcano",
        priority_class_name="ml-high",
        termination_grace_period_seconds=120,
        labels={"team": "ml"},
        annotations={"note": "x"},
    )
    tpl = build_pod_template(pod, labels={"airflow-k8s-ml/dag-id": "d"}, annotations={"a/b": "c"})
    assert tpl["metadata"] == {
        "labels": {"team": "ml", "airflow-k8s-ml/dag-id": "d"},
        "annotations": {"note": "x", "a/b": "c"},
    }
    spec = tpl["spec"]
    c = container(tpl)
    assert c["command"] == ["python", "-m", "train"] and c["args"] == ["--epochs", "3"]
    assert c["workingDir"] == "/app"
    assert c["env"] == [
        {"name": "EPOCHS", "value": "3"},
        {"name": "LR", "value": "0.001"},
        {"name": "NAME", "value": "x"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-secret", "key": "token"}}},
        {"name": "CFG", "valueFrom": {"configMapKeyRef": {"name": "train-config", "key": "cfg.yaml"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    assert c["envFrom"] == [{"secretRef": {"name": "aws-creds"}}, {"configMapRef": {"name": "common"}}]
    assert c["resources"] == {
        "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"},
        "limits": {"memory": "16Gi", "nvidia.com/gpu": "2"},
    }
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["volumeMounts"] == [
        {"name": "ckpt", "mountPath": "/ckpt"},
        {"name": "cache", "mountPath": "/cache"},
        {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True},
        {"name": "creds", "mountPath": "/etc/creds", "readOnly": True, "subPath": "key.json"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    assert spec["volumes"] == [
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt-pvc"}},
        {"name": "cache", "emptyDir": {"sizeLimit": "10Gi"}},
        {"name": "cfg", "configMap": {"name": "train-config"}},
        {"name": "creds", "secret": {"secretName": "gcs-key"}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
    ]
    assert spec["tolerations"] == [
        {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
    ]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["serviceAccountName"] == "trainer"
    assert spec["schedulerName"] == "volcano"
    assert spec["priorityClassName"] == "ml-high"
    assert spec["terminationGracePeriodSeconds"] == 120

    from kubernetes.client import ApiClient

    client = ApiClient()
    model = client._ApiClient__deserialize(tpl, "V1PodTemplateSpec")
    assert client.sanitize_for_serialization(model) == tpl


def test_mig_resource():
    pod = PodTemplate(image="x", gpus=1, gpu_resource="nvidia.com/mig-1g.5gb")
    resources = container(build_pod_template(pod))["resources"]
    assert resources == {"requests": {"nvidia.com/mig-1g.5gb": "1"}, "limits": {"nvidia.com/mig-1g.5gb": "1"}}


def test_spec_is_frozen_and_copies_inputs():
    env = {"A": "1"}
    command = ["a"]
    pod = PodTemplate(image="x", env=env, command=command)
    env["A"] = "2"
    command.append("b")
    assert pod.env == {"A": "1"} and pod.command == ("a",)
    with pytest.raises(AttributeError):
        pod.image = "y"  # type: ignore[misc]


def test_injected_env_comes_first_and_cannot_be_overridden():
    tpl = build_pod_template(PodTemplate(image="x", env={"B": "2"}), extra_env={"MODEL_URI": "s3://m"})
    assert container(tpl)["env"] == [{"name": "MODEL_URI", "value": "s3://m"}, {"name": "B", "value": "2"}]
    with pytest.raises(ValidationError) as info:
        build_pod_template(
            PodTemplate(image="x", env={"MODEL_URI": "other"}), extra_env={"MODEL_URI": "s3://m"}
        )
    assert info.value.field == "env[MODEL_URI]"


def test_reserved_labels_cannot_be_overridden():
    pod = PodTemplate(image="x", labels={"airflow-k8s-ml/dag-id": "spoof"})
    with pytest.raises(ValidationError) as info:
        build_pod_template(pod, labels={"airflow-k8s-ml/dag-id": "real"})
    assert info.value.field == "labels[airflow-k8s-ml/dag-id]"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"image": ""}, "image"),
        ({"image": None}, "image"),
        ({"image": "python 3"}, "image"),
        ({"command": "python train.py"}, "command"),
        ({"args": ["--x", 3]}, "args[1]"),
        ({"working_dir": "app"}, "working_dir"),
        ({"env": {"1BAD": "x"}}, "env[1BAD]"),
        ({"env": {"OK": None}}, "env[OK]"),
        ({"env": {"OK": True}}, "env[OK]"),
        ({"secret_env": {"TOKEN": "no-key"}}, "secret_env[TOKEN]"),
        ({"secret_env": {"TOKEN": "Bad_Name:key"}}, "secret_env[TOKEN]"),
        ({"secret_env": {"TOKEN": "s:k:x"}}, "secret_env[TOKEN]"),
        ({"config_map_env": {"CFG": "cm:"}}, "config_map_env[CFG]"),
        ({"env": {"A": "1"}, "secret_env": {"A": "s:k"}}, "secret_env[A]"),
        ({"env_from_secrets": ["Bad_Secret"]}, "env_from_secrets[0]"),
        ({"env_from_secrets": "one-secret"}, "env_from_secrets"),
        ({"requests": {"memory": "2GB"}}, "requests[memory]"),
        ({"limits": {"cpu": "lots"}}, "limits[cpu]"),
        ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, "requests[cpu]"),
        ({"gpus": 0.5}, "gpus"),
        ({"gpus": -1}, "gpus"),
        ({"gpus": "1"}, "gpus"),
        ({"gpus": 1, "limits": {"nvidia.com/gpu": 1}}, "gpus"),
        ({"gpu_resource": "cpu"}, "gpu_resource"),
        ({"limits": {"nvidia.com/gpu": "1.5"}}, "limits[nvidia.com/gpu]"),
        ({"node_selector": {"zone": "us east"}}, "node_selector[zone]"),
        ({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}, "tolerations[0].value"),
        ({"tolerations": [{"operator": "Equal", "value": "v"}]}, "tolerations[0].operator"),
        ({"tolerations": [{"key": "k", "operator": "Maybe"}]}, "tolerations[0].operator"),
        ({"tolerations": [{"key": "k", "effect": "NoRun"}]}, "tolerations[0].effect"),
        (
            {"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]},
            "tolerations[0].toleration_seconds",
        ),
        ({"tolerations": [{"key": "k", "colour": "x"}]}, "tolerations[0].colour"),
        ({"tolerations": {"key": "k"}}, "tolerations"),
        ({"volumes": [{"name": "v", "mount_path": "/v"}]}, "volumes[0]"),
        ({"volumes": [{"name": "v", "mount_path": "/v", "pvc": "a", "secret": "b"}]}, "volumes[0]"),
        ({"volumes": [{"name": "v", "mount_path": "rel", "pvc": "a"}]}, "volumes[0].mount_path"),
        ({"volumes": [{"name": "V", "mount_path": "/v", "pvc": "a"}]}, "volumes[0].name"),
        ({"volumes": [{"name": "v", "mount_path": "/v", "pvc": "a", "size_limit": "1Gi"}]}, "volumes[0]"),
        (
            {"volumes": [{"name": "v", "mount_path": "/v", "empty_dir": True, "size_limit": "1GB"}]},
            "volumes[0].size_limit",
        ),
        (
            {"volumes": [{"name": "v", "mount_path": "/v", "pvc": "a", "sub_path": "../x"}]},
            "volumes[0].sub_path",
        ),
        ({"volumes": [{"name": "v", "pvc": "a"}]}, "volumes[0].mount_path"),
        (
            {
                "volumes": [
                    {"name": "v", "mount_path": "/v", "pvc": "a"},
                    {"name": "v", "mount_path": "/w", "pvc": "b"},
                ]
            },
            "volumes[1].name",
        ),
        (
            {
                "volumes": [
                    {"name": "v", "mount_path": "/v", "pvc": "a"},
                    {"name": "w", "mount_path": "/v", "pvc": "b"},
                ]
            },
            "volumes[1].mount_path",
        ),
        (
            {"shm_size": "1Gi", "volumes": [{"name": "dshm", "mount_path": "/x", "pvc": "a"}]},
            "volumes[0].name",
        ),
        ({"shm_size": "lots"}, "shm_size"),
        ({"image_pull_policy": "Sometimes"}, "image_pull_policy"),
        ({"image_pull_secrets": ["Reg_Cred"]}, "image_pull_secrets[0]"),
        ({"service_account": "Trainer"}, "service_account"),
        ({"scheduler_name": "my scheduler"}, "scheduler_name"),
        ({"termination_grace_period_seconds": -1}, "termination_grace_period_seconds"),
        ({"pod_security_context": "restricted"}, "pod_security_context"),
        ({"labels": {"team": "a b"}}, "labels[team]"),
        ({"annotations": {"bad key!": "x"}}, "annotations[bad key!]"),
    ],
)
def test_invalid_pod_arguments_name_the_field(kwargs, field):
    with pytest.raises(ValidationError) as info:
        PodTemplate(**{"image": "x", **kwargs})
    assert info.value.field == field, str(info.value)


def test_spot_helpers():
    assert {t.key for t in spot_tolerations()} >= {
        "cloud.google.com/gke-spot",
        "kubernetes.azure.com/scalesetpriority",
    }
    assert spot_node_selector("eks") == {"eks.amazonaws.com/capacityType": "SPOT"}
    with pytest.raises(ValidationError):
        spot_tolerations("oracle")
    assert Toleration.coerce({"operator": "Exists"}).to_dict() == {"operator": "Exists"}


def test_pod_security_context_refuses_root():
    with pytest.raises(ValidationError):
        pod_security_context(run_as_user=0)
