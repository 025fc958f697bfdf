"""securityContext as the kubelet applies it (runAsUser/runAsGroup/groups, runAsNonRoot with upstream's
CreateContainerConfigError messages) and ``--deny-host-path``. Identities can only be switched by a
cluster running as root: those tests skip, saying so, otherwise."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.settings import ImageRule

from ..cluster_fixtures import fast_settings
from .pod_helpers import container_status, events_for, phase_is, pod_body, read_log, wait_pod, waiting_reason

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs a cluster running as root")
not_root = pytest.mark.skipif(os.geteuid() == 0, reason="the non-root behaviour is only seen as non-root")

# `id`, not Python: a user other than the cluster's may not reach its interpreter (e.g. under /root).
WHOAMI = ["sh", "-c", "id -u; id -g; id -G"]


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterThread]:
    """A cluster enforcing runAsNonRoot (the test fixtures' default cluster only warns)."""
    settings = fast_settings(tmp_path_factory.mktemp("enforcing"), run_as_non_root="enforce")
    with ClusterThread(settings) as running:
        yield running


@pytest.fixture()
def core(enforcing: ClusterThread) -> Iterator[client.CoreV1Api]:
    api = config.new_client_from_config(config_file=str(enforcing.kubeconfig_path))
    yield client.CoreV1Api(api)
    api.close()


@pytest.fixture()
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> str:
    name = request.node.name.lower().replace("_", "-")[:50].strip("-")
    core.create_namespace({"metadata": {"name": name}})
    return name


def _waiting_message(pod: client.V1Pod) -> str:
    return str(container_status(pod).state.waiting.message)


@as_root
def test_run_as_non_root_refuses_an_image_that_runs_as_root(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(
        namespace, pod_body("rooted", command=WHOAMI, securityContext={"runAsNonRoot": True})
    )

    pod = wait_pod(core, namespace, "rooted", lambda p: waiting_reason(p) == "CreateContainerConfigError")

    expected = (
        "container has runAsNonRoot and image will run as root "
        f'(pod: "rooted_{namespace}({pod.metadata.uid})", container: main)'
    )
    assert _waiting_message(pod) == expected
    assert pod.status.phase == "Pending"
    assert any(
        e.reason == "Failed" and e.message == f"Error: {expected}"
        for e in events_for(core, namespace, "rooted")
    )


@as_root
def test_warn_mode_starts_the_pod_and_records_the_refusal(cluster: ClusterThread) -> None:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    warned = client.CoreV1Api(api)
    warned.create_namespaced_pod(
        "default", pod_body("warned", command=WHOAMI, securityContext={"runAsNonRoot": True})
    )

    wait_pod(warned, "default", "warned", phase_is("Succeeded"))

    events = events_for(warned, "default", "warned")
    assert any(
        e.reason == "RunAsNonRootNotEnforced" and "image will run as root" in e.message for e in events
    )
    warned.delete_namespaced_pod("warned", "default")
    api.close()


@as_root
def test_run_as_non_root_refuses_run_as_user_zero(core: client.CoreV1Api, namespace: str) -> None:
    context = {"runAsNonRoot": True, "runAsUser": 0}
    core.create_namespaced_pod(
        namespace, pod_body("zero", command=WHOAMI, container={"securityContext": context})
    )

    pod = wait_pod(core, namespace, "zero", lambda p: waiting_reason(p) == "CreateContainerConfigError")

    where = f'(pod: "zero_{namespace}({pod.metadata.uid})", container: main)'
    assert _waiting_message(pod) == f"container's runAsUser breaks non-root policy {where}"


@as_root
def test_run_as_user_group_and_groups_are_applied(core: client.CoreV1Api, namespace: str) -> None:
    pod_context = {"runAsNonRoot": True, "runAsUser": 4321, "supplementalGroups": [7001], "fsGroup": 7002}
    container = {"securityContext": {"runAsGroup": 6543}}
    body = pod_body("someone", command=WHOAMI, securityContext=pod_context, container=container)
    core.create_namespaced_pod(namespace, body)

    wait_pod(core, namespace, "someone", phase_is("Succeeded", "Failed"))

    assert read_log(core, namespace, "someone").splitlines() == ["4321", "6543", "6543 7001 7002"]


@as_root
def test_an_image_rule_declares_the_image_user(tmp_path: Path) -> None:
    settings = fast_settings(tmp_path / "c", images=[ImageRule("nonroot.example/*", user=65532)])
    with ClusterThread(settings) as running:
        api = config.new_client_from_config(config_file=str(running.kubeconfig_path))
        core = client.CoreV1Api(api)
        body = pod_body(
            "nonroot", command=WHOAMI, image="nonroot.example/app:1", securityContext={"runAsNonRoot": True}
        )
        core.create_namespaced_pod("default", body)
        wait_pod(core, "default", "nonroot", phase_is("Succeeded", "Failed"))
        log = read_log(core, "default", "nonroot")
        api.close()
    assert log.split()[0] == "65532"


@not_root
def test_as_non_root_identities_are_not_switched_and_the_pod_is_told(
    core: client.CoreV1Api, namespace: str
) -> None:
    body = pod_body("asked", command=WHOAMI, securityContext={"runAsUser": os.geteuid() + 1})
    core.create_namespaced_pod(namespace, body)

    wait_pod(core, namespace, "asked", phase_is("Succeeded", "Failed"))

    assert read_log(core, namespace, "asked").split()[0] == str(os.geteuid())
    assert any(e.reason == "SecurityContextIgnored" for e in events_for(core, namespace, "asked"))


@pytest.fixture()
def denying(tmp_path: Path) -> Iterator[client.CoreV1Api]:
    with ClusterThread(fast_settings(tmp_path / "c", deny_host_path=True)) as running:
        api = config.new_client_from_config(config_file=str(running.kubeconfig_path))
        yield client.CoreV1Api(api)
        api.close()


def test_deny_host_path_refuses_host_path_pods_at_create(denying: client.CoreV1Api) -> None:
    volumes = [{"name": "host", "hostPath": {"path": "/"}}, {"name": "scratch", "emptyDir": {}}]
    with pytest.raises(client.ApiException) as refused:
        denying.create_namespaced_pod("default", pod_body("peek", "pass", volumes=volumes))

    assert refused.value.status == 403
    assert '"reason": "Forbidden"' in refused.value.body
    assert (
        'pods \\"peek\\" is forbidden: violates the local cluster\'s policy (--deny-host-path): '
        'hostPath volumes (volume \\"host\\")'
    ) in refused.value.body
    denying.create_namespaced_pod("default", pod_body("fine", "pass", volumes=volumes[1:]))
