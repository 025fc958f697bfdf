"""``plan_rollback`` against hand-written Deployments/ReplicaSets shaped like the API server's."""

from __future__ import annotations

import copy
from typing import Any

from airflow_k8s_ml.operators._rollback import ANNOTATIONS_TO_SKIP, equal_ignore_hash, plan_rollback

DEPLOY_UID = "d-uid"


def _template(model: str, hash_: str | None = None) -> dict[str, Any]:
    labels = {"app": "m"}
    if hash_:
        labels["pod-template-hash"] = hash_
    return {
        "metadata": {"labels": labels, "annotations": {"airflow-k8s-ml/model-uri": model}},
        "spec": {
            "containers": [{"name": "server", "image": "img", "env": [{"name": "MODEL_URI", "value": model}]}]
        },
    }


def _rs(name: str, revision: str | None, model: str, owner: str = DEPLOY_UID, **annotations: str) -> dict:
    notes = dict(annotations)
    if revision is not None:
        notes["deployment.kubernetes.io/revision"] = revision
    return {
        "metadata": {
            "name": name,
            "annotations": notes,
            "ownerReferences": [{"kind": "Deployment", "name": "m", "uid": owner, "controller": True}],
        },
        "spec": {"template": _template(model, hash_=name.rsplit("-", 1)[-1])},
    }


def _deployment(model: str, revision: str = "2", paused: bool = False) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "m",
            "namespace": "ns",
            "uid": DEPLOY_UID,
            "annotations": {
                "deployment.kubernetes.io/revision": revision,
                "airflow-k8s-ml/model-uri": model,
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
        },
        "spec": {"paused": paused, "template": _template(model)},
    }


V1, V2 = "file:///m/step-1/", "file:///m/step-2/"


def test_undo_restores_the_second_newest_template_without_the_hash_label() -> None:
    old = _rs(
        "m-aaa", "1", V1, **{"airflow-k8s-ml/model-uri": V1, "deployment.kubernetes.io/desired-replicas": "2"}
    )
    new = _rs("m-bbb", "2", V2)
    plan = plan_rollback(_deployment(V2), [new, old])
    assert plan.action == "patch" and plan.to_revision == 1 and plan.replica_set == "m-aaa"
    template_op, annotations_op = plan.patch
    assert template_op == {"op": "replace", "path": "/spec/template", "value": _template(V1)}
    assert "pod-template-hash" not in template_op["value"]["metadata"]["labels"]
    # kubectl: skip-listed keys keep the Deployment's values, every other key comes from the ReplicaSet.
    assert annotations_op == {
        "op": "replace",
        "path": "/metadata/annotations",
        "value": {
            "deployment.kubernetes.io/revision": "2",
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "airflow-k8s-ml/model-uri": V1,
        },
    }


def test_to_revision_picks_that_revision_and_unknown_revisions_are_reported() -> None:
    rss = [_rs("m-aaa", "1", V1), _rs("m-bbb", "2", V2), _rs("m-ccc", "3", "file:///m/step-3/")]
    plan = plan_rollback(_deployment("file:///m/step-3/", "3"), rss, to_revision=1)
    assert plan.action == "patch" and plan.replica_set == "m-aaa"
    missing = plan_rollback(_deployment(V2), rss, to_revision=7)
    assert (missing.action, missing.message) == (
        "impossible",
        "unable to find specified revision 7 in history",
    )


def test_no_history_and_foreign_replica_sets() -> None:
    only = [_rs("m-bbb", "2", V2)]
    plan = plan_rollback(_deployment(V2), only)
    assert (plan.action, plan.message) == ("impossible", 'no rollout history found for deployment "m"')
    # A ReplicaSet with matching labels but another controller is not history of this Deployment.
    foreign = _rs("m-aaa", "1", V1, owner="someone-else")
    assert plan_rollback(_deployment(V2), [*only, foreign]).action == "impossible"


def test_skip_when_the_template_already_matches_and_refuse_paused() -> None:
    rss = [_rs("m-aaa", "1", V1), _rs("m-bbb", "2", V2)]
    current = _deployment(V1, "3")
    plan = plan_rollback(current, rss, to_revision=1)
    assert plan.action == "skip"
    assert plan.message == "skipped rollback (current template already matches revision 1)"
    paused = plan_rollback(_deployment(V2, paused=True), rss)
    assert paused.action == "impossible" and "resume it first with 'kubectl rollout resume'" in paused.message


def test_revision_annotation_that_is_not_a_number_is_ignored_like_kubectl() -> None:
    rss = [_rs("m-aaa", "x", V1), _rs("m-bbb", "2", V2), _rs("m-ccc", None, "file:///m/step-0/")]
    plan = plan_rollback(_deployment(V2), rss)
    # "x" is skipped; the missing annotation counts as revision 0, the second newest.
    assert plan.action == "patch" and plan.to_revision == 0 and plan.replica_set == "m-ccc"


def test_equal_ignore_hash_treats_empty_and_absent_alike() -> None:
    left = _template(V1, hash_="abc")
    right = copy.deepcopy(_template(V1))
    right["spec"]["volumes"] = []
    assert equal_ignore_hash(left, right)
    assert not equal_ignore_hash(left, _template(V2))


def test_skip_list_is_kubectls() -> None:
    assert {
        "kubectl.kubernetes.io/last-applied-configuration",
        "deployment.kubernetes.io/revision",
        "deployment.kubernetes.io/revision-history",
        "deployment.kubernetes.io/desired-replicas",
        "deployment.kubernetes.io/max-replicas",
        "deprecated.deployment.rollback.to",
    } == ANNOTATIONS_TO_SKIP


def test_revision_hash_selects_the_pods_of_a_revision() -> None:
    from airflow_k8s_ml.operators._rollback import revision_hash

    rss = [_rs("m-aaa", "1", V1), _rs("m-bbb", "2", V2)]
    assert revision_hash(rss, 2) == "bbb" and revision_hash(rss, 5) is None


def test_failure_and_rollback_wording() -> None:
    from airflow_k8s_ml.errors import DeadlineExceeded, WorkloadFailed
    from airflow_k8s_ml.operators._rollout_report import failure_reason, rollback_message, rollout_error
    from airflow_k8s_ml.status import WorkloadState

    state = WorkloadState(
        "failed", "ProgressDeadlineExceeded", 'deployment "m" exceeded its progress deadline'
    )
    assert failure_reason("failed", 2, state, "ignored") == (
        'rollout of revision 2 failed (ProgressDeadlineExceeded): deployment "m" exceeded its progress '
        "deadline"
    )
    assert failure_reason("deadline", 2, WorkloadState("running"), "overall deadline 4s exceeded: x") == (
        "rollout of revision 2 did not finish: overall deadline 4s exceeded: x"
    )
    assert (
        rollback_message("R", 1, 3, V1, True)
        == f"R; rolled back: revision 3 (the template of revision 1, model {V1}) is serving"
    )
    assert rollback_message("R", 1, 3, V1, False, "stuck").endswith("but it is not healthy: stuck")
    expired = rollout_error("m", deadline=True)
    assert isinstance(expired, DeadlineExceeded) and expired.deadline == "rollout_timeout"
    assert type(rollout_error("m", deadline=False)) is WorkloadFailed
