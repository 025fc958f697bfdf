"""Eviction: through the API (``pods/eviction``: graceful delete) and by the kubelet (admin action
``evict``: Failed, reason Evicted, condition DisruptionTarget)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import admin

from .pod_helpers import condition, container_status, phase_is, pod_body, read_log, wait_pod, watch_pod

_SLEEPER = "import time; print('up', flush=True); time.sleep(60)"


def _running(core: client.CoreV1Api, namespace: str, name: str) -> None:
    wait_pod(
        core,
        namespace,
        name,
        lambda p: p.status.phase == "Running" and read_log(core, namespace, name) == "up\n",
    )


def test_kubelet_eviction_fails_the_pod(
    core: client.CoreV1Api, namespace: str, cluster: ClusterThread
) -> None:
    core.create_namespaced_pod(namespace, pod_body("victim", _SLEEPER))
    _running(core, namespace, "victim")

    evicted = admin(
        cluster,
        "evict",
        {"namespace": namespace, "name": "victim", "message": "The node was low on resource: memory. "},
    )

    assert evicted["status"]["phase"] == "Failed" and evicted["status"]["reason"] == "Evicted"
    pod = wait_pod(core, namespace, "victim", phase_is("Failed"))
    assert pod.status.message == "The node was low on resource: memory. "
    target = condition(pod, "DisruptionTarget")
    assert (target.status, target.reason) == ("True", "TerminationByKubelet")
    assert container_status(pod).state.terminated.exit_code == 137


def test_eviction_api_deletes_the_pod_gracefully(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_body("drained", _SLEEPER, terminationGracePeriodSeconds=1))
    _running(core, namespace, "drained")
    before = core.read_namespaced_pod("drained", namespace).metadata.resource_version

    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="drained", namespace=namespace))
    response = core.create_namespaced_pod_eviction("drained", namespace, eviction, _preload_content=False)
    assert response.status == 201
    assert json.loads(response.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }

    seen = watch_pod(
        core, namespace, "drained", lambda p: p.metadata.deletion_timestamp is not None, since=before
    )
    target = condition(seen[-1], "DisruptionTarget")
    assert (target.reason, target.message) == ("EvictionByEvictionAPI", "Eviction API: evicting")
    assert seen[-1].metadata.deletion_timestamp is not None
    try:
        wait_pod(core, namespace, "drained", lambda p: False, timeout=5)
    except client.ApiException as gone:
        assert gone.status == 404


def _budget(name: str, selector: dict[str, str], **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }


def _processed(
    policy: client.PolicyV1Api, namespace: str, name: str, healthy: int
) -> client.V1PodDisruptionBudget:
    """The budget once the disruption controller has counted ``healthy`` pods for its generation."""
    deadline = time.monotonic() + 10
    while True:
        pdb = policy.read_namespaced_pod_disruption_budget(name, namespace)
        status = pdb.status
        if (
            status
            and status.observed_generation == pdb.metadata.generation
            and status.current_healthy == healthy
        ):
            return pdb
        assert time.monotonic() < deadline, f"budget {name} not processed in 10s: {status}"
        time.sleep(0.05)


def _evict(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    return core.create_namespaced_pod_eviction(name, namespace, eviction, _preload_content=False)


def test_eviction_api_honours_the_disruption_budget(
    core: client.CoreV1Api, api_client: client.ApiClient, namespace: str
) -> None:
    """A budget that needs every replica (a distributed run's) refuses the drain with upstream's 429; one
    that allows a disruption lets exactly one eviction through, then refuses the next."""
    policy = client.PolicyV1Api(api_client)
    for name in ("rank-0", "rank-1"):
        body = pod_body(name, _SLEEPER, terminationGracePeriodSeconds=1)
        body["metadata"]["labels"] = {"run": "ddp"}
        core.create_namespaced_pod(namespace, body)
        _running(core, namespace, name)
    policy.create_namespaced_pod_disruption_budget(
        namespace, _budget("all-ranks", {"run": "ddp"}, minAvailable=2)
    )
    _processed(policy, namespace, "all-ranks", healthy=2)

    with pytest.raises(client.ApiException) as refused:
        _evict(core, namespace, "rank-0")
    assert refused.value.status == 429
    status = json.loads(refused.value.body)
    assert (status["reason"], status["message"]) == (
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    )
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget all-ranks needs 2 healthy pods and has 2 currently",
        }
    ]
    pod = core.read_namespaced_pod("rank-0", namespace)
    assert pod.metadata.deletion_timestamp is None and condition(pod, "DisruptionTarget") is None

    budget = policy.read_namespaced_pod_disruption_budget("all-ranks", namespace)
    budget.spec.min_available = 1
    policy.replace_namespaced_pod_disruption_budget("all-ranks", namespace, budget)
    _processed(policy, namespace, "all-ranks", healthy=2)
    assert _evict(core, namespace, "rank-0").status == 201
    with pytest.raises(client.ApiException) as second:
        _evict(core, namespace, "rank-1")
    assert second.value.status == 429
    assert core.read_namespaced_pod("rank-1", namespace).metadata.deletion_timestamp is None


def _gone(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except client.ApiException as exc:
        return exc.status == 404
    return False


def test_a_noexecute_taint_deletes_the_pods_that_do_not_tolerate_it_as_disruptions(
    core: client.CoreV1Api, namespace: str, cluster: ClusterThread
) -> None:
    """The taint eviction controller as upstream: untolerated pods get ``DisruptionTarget``
    ``DeletionByTaintManager`` and are deleted at once, a pod tolerating the taint for 1 s after that second,
    a pod tolerating it for ever stays; the taint is what ``kubectl taint ... :NoExecute`` writes."""
    taint = {"key": "maintenance", "value": "now", "effect": "NoExecute"}
    bodies = {
        "plain": pod_body("plain", _SLEEPER, terminationGracePeriodSeconds=1),
        "brief": pod_body("brief", _SLEEPER, terminationGracePeriodSeconds=1),
        "steady": pod_body("steady", _SLEEPER, terminationGracePeriodSeconds=1),
    }
    bodies["brief"]["spec"]["tolerations"] = [{**taint, "operator": "Equal", "tolerationSeconds": 1}]
    bodies["steady"]["spec"]["tolerations"] = [{"key": "maintenance", "operator": "Exists"}]
    for name, body in bodies.items():
        core.create_namespaced_pod(namespace, body)
        _running(core, namespace, name)
    before = core.read_namespaced_pod("plain", namespace).metadata.resource_version
    node = core.read_namespaced_pod("plain", namespace).spec.node_name
    core.patch_node(node, {"spec": {"taints": [taint]}})
    try:
        seen = watch_pod(
            core, namespace, "plain", lambda p: p.metadata.deletion_timestamp is not None, since=before
        )
        target = condition(seen[-1], "DisruptionTarget")
        assert (target.status, target.reason, target.message) == (
            "True",
            "DeletionByTaintManager",
            "Taint manager: deleting due to NoExecute taint",
        )
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=plain").items
        assert any(
            e.reason == "TaintManagerEviction" and e.message == f"Marking for deletion Pod {namespace}/plain"
            for e in events
        )
        deadline = time.monotonic() + 30
        while not _gone(core, namespace, "brief"):  # after its tolerationSeconds
            assert time.monotonic() < deadline, "the pod tolerating the taint for 1 s was not deleted in 30 s"
            time.sleep(0.2)
        steady = core.read_namespaced_pod("steady", namespace)
        assert steady.metadata.deletion_timestamp is None and condition(steady, "DisruptionTarget") is None
        # while tainted, a new pod without the toleration is not placed on the node (TaintToleration)
        core.create_namespaced_pod(namespace, pod_body("late", _SLEEPER))
        pending = wait_pod(core, namespace, "late", lambda p: condition(p, "PodScheduled") is not None)
        assert condition(pending, "PodScheduled").message == (
            "0/1 nodes are available: 1 node(s) had untolerated taint {maintenance: now}."
        ), condition(pending, "PodScheduled").message
    finally:
        core.patch_node(node, {"spec": {"taints": None}})
    _running(core, namespace, "late")  # placed once the taint is gone


def test_a_higher_priority_pod_preempts_a_lower_one_as_a_disruption(
    core: client.CoreV1Api, api_client: client.ApiClient, namespace: str
) -> None:
    """Priority admission and DefaultPreemption as upstream: the class sets the pod's priority, a pod that
    does not fit evicts the lower-priority one (``DisruptionTarget`` ``PreemptionByScheduler``, a
    ``Preempted`` event) and runs once the victim is gone; an unknown class is refused."""
    scheduling = client.SchedulingV1Api(api_client)
    high = f"high-{namespace}"[:63]
    scheduling.create_priority_class({"metadata": {"name": high}, "value": 1000})
    try:
        low = pod_body("low", _SLEEPER, terminationGracePeriodSeconds=1)
        low["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "5"}}
        core.create_namespaced_pod(namespace, low)
        _running(core, namespace, "low")
        before = core.read_namespaced_pod("low", namespace).metadata.resource_version

        urgent = pod_body("urgent", _SLEEPER, terminationGracePeriodSeconds=1)
        urgent["spec"]["priorityClassName"] = high
        urgent["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "5"}}
        created = core.create_namespaced_pod(namespace, urgent)
        assert created.spec.priority == 1000

        seen = watch_pod(
            core, namespace, "low", lambda p: p.metadata.deletion_timestamp is not None, since=before
        )
        target = condition(seen[-1], "DisruptionTarget")
        assert (target.status, target.reason, target.message) == (
            "True",
            "PreemptionByScheduler",
            "default-scheduler: preempting to accommodate a higher priority pod",
        )
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=low").items
        assert any(
            e.reason == "Preempted" and e.message.startswith(f"Preempted by pod {created.metadata.uid}")
            for e in events
        )
        _running(core, namespace, "urgent")

        unknown = pod_body("unknown", _SLEEPER)
        unknown["spec"]["priorityClassName"] = "no-such-class"
        with pytest.raises(client.ApiException) as refused:
            core.create_namespaced_pod(namespace, unknown)
        assert refused.value.status == 403
        assert json.loads(refused.value.body)["message"] == (
            'pods "unknown" is forbidden: no PriorityClass with name no-such-class was found'
        )
    finally:
        scheduling.delete_priority_class(high)
