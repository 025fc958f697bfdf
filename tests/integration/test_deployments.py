"""Deployments and ReplicaSets on the local cluster, through the official client and kubectl: availability
with readiness probes, pod-template-hash ReplicaSets and revisions, rolling updates, the progress deadline,
``kubectl rollout status`` / ``rollout undo`` / ``scale``, and the ``/scale`` subresource."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import wait_for

from .deploy_helpers import condition, echo_container, echo_deployment, events, kubectl, raw_request

REVISION = "deployment.kubernetes.io/revision"


@pytest.fixture()
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


def _available(apps: client.AppsV1Api, namespace: str, name: str, replicas: int = 2) -> client.V1Deployment:
    return wait_for(
        lambda: apps.read_namespaced_deployment(name, namespace),
        lambda d: (
            d.status.observed_generation == d.metadata.generation
            and d.status.updated_replicas == replicas
            and d.status.available_replicas == replicas
            and (d.status.replicas or 0) == replicas
        ),
        what=f"deployment {name} available",
    )


def _replicasets(apps: client.AppsV1Api, namespace: str) -> dict[str, client.V1ReplicaSet]:
    items = apps.list_namespaced_replica_set(namespace).items
    return {rs.metadata.annotations[REVISION]: rs for rs in items}


def _proxy_get(core: client.CoreV1Api, namespace: str, service: str, path: str = "hello") -> dict:
    response = core.connect_get_namespaced_service_proxy_with_path(
        f"{service}:80", namespace, path, _preload_content=False
    )
    return json.loads(response.data)


def test_two_replicas_on_one_port_become_available(
    apps: client.AppsV1Api, core: client.CoreV1Api, namespace: str
) -> None:
    apps.create_namespaced_deployment(namespace, echo_deployment("web"))
    deployment = _available(apps, namespace, "web")

    assert deployment.spec.strategy.rolling_update.max_surge == "25%"
    assert deployment.spec.revision_history_limit == 10 and deployment.spec.progress_deadline_seconds == 600
    assert deployment.metadata.annotations[REVISION] == "1"
    available, progressing = condition(deployment, "Available"), condition(deployment, "Progressing")
    assert (available.status, available.reason, available.message) == (
        "True",
        "MinimumReplicasAvailable",
        "Deployment has minimum availability.",
    )
    (rs,) = apps.list_namespaced_replica_set(namespace).items
    pod_hash = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"web-{pod_hash}"
    assert (progressing.status, progressing.reason, progressing.message) == (
        "True",
        "NewReplicaSetAvailable",
        f'ReplicaSet "{rs.metadata.name}" has successfully progressed.',
    )
    assert rs.spec.selector.match_labels == {"app": "web", "pod-template-hash": pod_hash}
    assert rs.metadata.annotations == {
        REVISION: "1",
        "deployment.kubernetes.io/desired-replicas": "2",
        "deployment.kubernetes.io/max-replicas": "3",
    }
    assert rs.metadata.owner_references[0].kind == "Deployment" and rs.metadata.owner_references[0].controller
    assert (
        rs.status.replicas,
        rs.status.ready_replicas,
        rs.status.available_replicas,
        rs.status.fully_labeled_replicas,
    ) == (2, 2, 2, 2)

    pods = core.list_namespaced_pod(namespace, label_selector=f"pod-template-hash={pod_hash}").items
    assert len(pods) == 2 and all(p.metadata.generate_name == f"{rs.metadata.name}-" for p in pods)
    assert all(p.metadata.owner_references[0].uid == rs.metadata.uid for p in pods)
    assert len({p.status.pod_ip for p in pods}) == 2
    assert {p.spec.containers[0].ports[0].container_port for p in pods} == {8080}
    assert ("Normal", "ScalingReplicaSet", f"Scaled up replica set {rs.metadata.name} from 0 to 2") in events(
        core, namespace, "web"
    )


def test_template_change_rolls_to_revision_two(
    apps: client.AppsV1Api, cluster: ClusterThread, namespace: str
) -> None:
    apps.create_namespaced_deployment(namespace, echo_deployment("web"))
    _available(apps, namespace, "web")
    apps.patch_namespaced_deployment(
        "web", namespace, {"spec": {"template": {"spec": {"containers": [echo_container("v2")]}}}}
    )

    done = kubectl(cluster, "rollout", "status", "deployment/web", "-n", namespace, "--timeout=30s")
    assert done.returncode == 0, done.stderr
    assert 'deployment "web" successfully rolled out' in done.stdout
    deployment = _available(apps, namespace, "web")
    assert deployment.metadata.annotations[REVISION] == "2"
    revisions = _replicasets(apps, namespace)
    assert set(revisions) == {"1", "2"}
    assert revisions["1"].spec.replicas == 0 and revisions["2"].spec.replicas == 2
    assert revisions["2"].spec.template.spec.containers[0].env[0].value == "v2"
    assert condition(deployment, "Progressing").reason == "NewReplicaSetAvailable"


def test_broken_revision_times_out_and_rollout_undo_restores(
    apps: client.AppsV1Api, core: client.CoreV1Api, cluster: ClusterThread, namespace: str
) -> None:
    apps.create_namespaced_deployment(namespace, echo_deployment("web", progressDeadlineSeconds=2))
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]},
        },
    )
    original = _available(apps, namespace, "web").spec.template
    apps.patch_namespaced_deployment(
        "web",
        namespace,
        {"spec": {"template": {"spec": {"containers": [echo_container("broken", probe_path="/broken")]}}}},
    )

    stuck = wait_for(
        lambda: apps.read_namespaced_deployment("web", namespace),
        lambda d: condition(d, "Progressing").reason == "ProgressDeadlineExceeded",
        what="progress deadline",
    )
    broken_rs = _replicasets(apps, namespace)["2"]
    assert condition(stuck, "Progressing").status == "False"
    assert condition(stuck, "Progressing").message == (
        f'ReplicaSet "{broken_rs.metadata.name}" has timed out progressing.'
    )
    assert stuck.status.available_replicas == 2 and stuck.status.updated_replicas == 1
    assert _proxy_get(core, namespace, "web")["version"] == "v1"  # the old pods keep serving

    failed = kubectl(cluster, "rollout", "status", "deployment/web", "-n", namespace, "--timeout=20s")
    assert failed.returncode == 1
    assert 'deployment "web" exceeded its progress deadline' in failed.stderr

    undone = kubectl(cluster, "rollout", "undo", "deployment/web", "-n", namespace)
    assert undone.returncode == 0, undone.stderr
    assert "rolled back" in undone.stdout
    restored = _available(apps, namespace, "web")
    revisions = _replicasets(apps, namespace)
    assert set(revisions) == {"2", "3"}
    assert revisions["3"].metadata.annotations["deployment.kubernetes.io/revision-history"] == "1"
    assert revisions["3"].metadata.name != broken_rs.metadata.name and revisions["2"].spec.replicas == 0
    assert restored.metadata.annotations[REVISION] == "3"
    assert restored.spec.template.spec.containers[0].env == original.spec.containers[0].env
    assert condition(restored, "Progressing").reason == "NewReplicaSetAvailable"
    assert kubectl(cluster, "rollout", "status", "deployment/web", "-n", namespace).returncode == 0


def test_scale_subresource_and_kubectl_scale(
    apps: client.AppsV1Api, cluster: ClusterThread, namespace: str
) -> None:
    apps.create_namespaced_deployment(namespace, echo_deployment("web", replicas=1))
    _available(apps, namespace, "web", replicas=1)

    scale = apps.read_namespaced_deployment_scale("web", namespace)
    assert (scale.kind, scale.api_version) == ("Scale", "autoscaling/v1")
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (1, 1, "app=web")

    scaled = kubectl(cluster, "scale", "deployment/web", "--replicas=3", "-n", namespace)
    assert scaled.returncode == 0, scaled.stderr
    deployment = _available(apps, namespace, "web", replicas=3)
    assert deployment.metadata.generation == 2

    patched = apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 2}})
    assert patched.spec.replicas == 2
    _available(apps, namespace, "web", replicas=2)
    (rs,) = apps.list_namespaced_replica_set(namespace).items
    assert rs.metadata.annotations["deployment.kubernetes.io/desired-replicas"] == "2"

    with pytest.raises(ApiException) as invalid:
        apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": -1}})
    assert invalid.value.status == 422
    assert json.loads(invalid.value.body)["message"] == (
        'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: '
        "must be greater than or equal to 0"
    )
    rs_scale = apps.read_namespaced_replica_set_scale(rs.metadata.name, namespace)
    assert rs_scale.status.selector == f"app=web,pod-template-hash={rs.metadata.labels['pod-template-hash']}"


def test_recreate_stops_old_pods_first_and_history_limit_prunes(
    apps: client.AppsV1Api, core: client.CoreV1Api, namespace: str
) -> None:
    body = echo_deployment("web", strategy={"type": "Recreate"}, revisionHistoryLimit=0)
    apps.create_namespaced_deployment(namespace, body)
    _available(apps, namespace, "web")
    old = apps.list_namespaced_replica_set(namespace).items[0].metadata.name
    apps.patch_namespaced_deployment(
        "web", namespace, {"spec": {"template": {"spec": {"containers": [echo_container("v2")]}}}}
    )
    deployment = _available(apps, namespace, "web")
    assert deployment.spec.strategy.rolling_update is None
    revisions = wait_for(
        lambda: _replicasets(apps, namespace), lambda rss: set(rss) == {"2"}, what="revision 1 pruned"
    )
    new = revisions["2"].metadata.name
    messages = [m for _, reason, m in events(core, namespace, "web") if reason == "ScalingReplicaSet"]
    assert messages.index(f"Scaled down replica set {old} from 2 to 0") < messages.index(
        f"Scaled up replica set {new} from 0 to 2"
    )


def test_selector_must_match_template_labels(
    apps: client.AppsV1Api, namespace: str, cluster: ClusterThread
) -> None:
    body = echo_deployment("web")
    body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    status, _, raw = raw_request(
        cluster,
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 422
    answer = json.loads(raw)
    assert answer["message"] == (
        'Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"web"}: `selector` does not match template `labels`'
    )
    assert answer["details"]["causes"][0]["field"] == "spec.template.metadata.labels"
