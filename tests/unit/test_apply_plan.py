"""The client-side "would this apply change anything?" decision (kube/apply_plan.py), on plain dicts."""

from __future__ import annotations

import copy

from airflow_k8s_ml.kube.apply_plan import APPLIED_ANNOTATION, covers, desired_digest, is_unchanged, stamped
from airflow_k8s_ml.manifests.naming import RUN_ID_LABEL

DESIRED = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "digits",
        "namespace": "ml",
        "labels": {"app": "digits", RUN_ID_LABEL: "run-1"},
        "annotations": {RUN_ID_LABEL: "run-1"},
    },
    "spec": {
        "type": "ClusterIP",
        "selector": {"app": "digits"},
        "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
        "sessionAffinityConfig": {},
    },
}


def live_of(desired: dict) -> dict:
    """What the API server returns after applying ``desired``: defaults, bookkeeping and status added."""
    live = stamped(desired)
    live["metadata"].update({"uid": "u-1", "resourceVersion": "42", "managedFields": [{"manager": "x"}]})
    live["metadata"]["labels"]["added-by-someone"] = "yes"
    live["spec"].update({"clusterIP": "10.0.0.7", "sessionAffinity": "None"})
    live["spec"].pop("sessionAffinityConfig")  # empty maps are dropped by the server
    live["status"] = {"loadBalancer": {}}
    return live


def test_the_same_desired_state_is_unchanged_and_a_new_run_id_alone_is_not_a_change():
    live = live_of(DESIRED)
    assert is_unchanged(DESIRED, live)
    next_run = copy.deepcopy(DESIRED)
    next_run["metadata"]["labels"][RUN_ID_LABEL] = "run-2"
    next_run["metadata"]["annotations"][RUN_ID_LABEL] = "run-2"
    assert desired_digest(next_run) == desired_digest(DESIRED)
    assert is_unchanged(next_run, live)


def test_a_changed_or_dropped_field_is_a_change():
    live = live_of(DESIRED)
    changed = copy.deepcopy(DESIRED)
    changed["spec"]["ports"][0]["port"] = 8080
    assert not is_unchanged(changed, live)
    # A field we set before and no longer set: only the digest can tell (the live object still has it).
    dropped = copy.deepcopy(DESIRED)
    del dropped["metadata"]["labels"]["app"]
    assert covers(dropped, live) and not is_unchanged(dropped, live)


def test_drift_of_one_of_our_fields_is_a_change_and_an_unstamped_object_is_applied():
    live = live_of(DESIRED)
    live["spec"]["selector"] = {"app": "other"}  # kubectl edit
    assert not is_unchanged(DESIRED, live)
    unstamped = live_of(DESIRED)
    del unstamped["metadata"]["annotations"][APPLIED_ANNOTATION]
    assert not is_unchanged(DESIRED, unstamped) and not is_unchanged(DESIRED, None)


def test_covers_is_a_subset_with_equal_quantities_zero_values_and_strict_lists():
    assert covers({"cpu": "0.5", "memory": "1Gi"}, {"cpu": "500m", "memory": "1024Mi"})
    assert not covers({"cpu": "1"}, {"cpu": "2"})
    assert covers({"minReadySeconds": 0, "paused": None}, {})  # Go's omitempty drops zero values
    assert not covers({"replicas": 2}, {})
    assert not covers({"x": [1, 2]}, {"x": [1, 2, 3]})  # a list we own has exactly our items
    assert not covers({"flag": True}, {"flag": 1}) and not covers({"n": 1}, {"n": True})
    assert not covers({"a": {"b": 1}}, {"a": "text"})
