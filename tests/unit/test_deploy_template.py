"""Pod-template hashing, semantic equality and revision annotations of the deployment controller."""

from __future__ import annotations

import copy

from airflow_k8s_ml.testbed.local_cluster.controllers.deployment.revisions import set_new_rs_annotations
from airflow_k8s_ml.testbed.local_cluster.controllers.deployment.template import (
    HASH_LABEL,
    apply_template_defaults,
    equal_ignore_hash,
    template_hash,
    with_hash,
)

TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]},
}


def test_hash_is_stable_safe_and_ignores_its_own_label() -> None:
    first = template_hash(TEMPLATE)
    assert first == template_hash(copy.deepcopy(TEMPLATE))
    assert 1 <= len(first) <= 10 and set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert template_hash(with_hash(TEMPLATE, first)) == first
    changed = copy.deepcopy(TEMPLATE)
    changed["spec"]["containers"][0]["image"] = "nginx:1.28"
    assert template_hash(changed) != first
    assert template_hash(TEMPLATE, collision_count=1) != first


def test_kubectl_round_trip_noise_compares_equal() -> None:
    """What ``kubectl rollout undo`` sends back: Go zero values (creationTimestamp: null, resources: {})."""
    defaulted = copy.deepcopy(TEMPLATE)
    apply_template_defaults(defaulted)
    round_tripped = copy.deepcopy(defaulted)
    round_tripped["metadata"]["creationTimestamp"] = None
    round_tripped["spec"]["containers"][0]["resources"] = {}
    round_tripped["metadata"]["labels"][HASH_LABEL] = "abc"
    assert equal_ignore_hash(defaulted, round_tripped)
    assert template_hash(defaulted) == template_hash(round_tripped)
    assert not equal_ignore_hash(defaulted, TEMPLATE)  # defaults are part of the template


def test_template_defaults_match_the_apiserver() -> None:
    template = copy.deepcopy(TEMPLATE)
    template["metadata"]["creationTimestamp"] = None
    apply_template_defaults(template)
    spec, container = template["spec"], template["spec"]["containers"][0]
    assert "creationTimestamp" not in template["metadata"]
    assert (
        spec["restartPolicy"],
        spec["dnsPolicy"],
        spec["schedulerName"],
        spec["terminationGracePeriodSeconds"],
        spec["securityContext"],
    ) == ("Always", "ClusterFirst", "default-scheduler", 30, {})
    assert (
        container["imagePullPolicy"],
        container["terminationMessagePath"],
        container["resources"],
        container["ports"][0]["protocol"],
    ) == ("IfNotPresent", "/dev/termination-log", {}, "TCP")
    assert "serviceAccountName" not in spec and "tolerations" not in spec  # pod-only admission plugins


def test_rollback_raises_revision_and_keeps_history() -> None:
    deployment = {
        "metadata": {
            "annotations": {"kubernetes.io/change-cause": "v1", "deployment.kubernetes.io/revision": "2"}
        },
        "spec": {"replicas": 2},
    }
    old_rs = {"metadata": {"annotations": {"deployment.kubernetes.io/revision": "1"}}}
    assert set_new_rs_annotations(deployment, old_rs, 3, True, 2, 3)
    annotations = old_rs["metadata"]["annotations"]
    assert annotations["deployment.kubernetes.io/revision"] == "3"
    assert annotations["deployment.kubernetes.io/revision-history"] == "1"
    assert annotations["kubernetes.io/change-cause"] == "v1"
    assert "deployment.kubernetes.io/desired-replicas" not in annotations  # only set on create
    assert not set_new_rs_annotations(deployment, old_rs, 2, True, 2, 3)  # never lowered


def test_new_replica_set_gets_size_annotations() -> None:
    rs: dict = {"metadata": {}}
    set_new_rs_annotations({"metadata": {}}, rs, 1, False, 4, 5)
    assert rs["metadata"]["annotations"] == {
        "deployment.kubernetes.io/revision": "1",
        "deployment.kubernetes.io/desired-replicas": "4",
        "deployment.kubernetes.io/max-replicas": "5",
    }
