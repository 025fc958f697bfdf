"""Our validation messages survive Rich markup (what ``airflow dags list-import-errors`` prints them
through) and keep their meaning: a key path's key quoted, a character class reordered to the same class."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from airflow_k8s_ml.errors import ValidationError, markup_proof
from airflow_k8s_ml.k8s.quantities import QUANTITY_PATTERN


def shown_by_rich(text: str) -> str:
    out = io.StringIO()
    Console(file=out, width=10_000, color_system=None).print(text)
    return out.getvalue().rstrip("\n")


@pytest.mark.parametrize(
    "text",
    [
        f"requests[memory]: quantities must match the regular expression '{QUANTITY_PATTERN}'",
        "labels[app.kubernetes.io/name]: regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'",
        "env[RESUME_FROM]: set by the operator",
        "spec.template.spec.containers[0].image: required",
    ],
)
def test_a_proofed_message_is_shown_whole(text: str) -> None:
    proofed = markup_proof(text)
    assert shown_by_rich(proofed) == proofed
    assert str(ValidationError(*text.split(": ", 1))) == proofed


def test_a_reordered_character_class_is_the_same_class() -> None:
    proofed = markup_proof(f"'{QUANTITY_PATTERN}'").strip("'")
    assert proofed != QUANTITY_PATTERN
    for sample in ["500m", "2Gi", "1.5", "1e3", "2 GB", "2GB", "-1Ki", "1E", "x"]:
        assert bool(re.fullmatch(proofed, sample)) == bool(re.fullmatch(QUANTITY_PATTERN, sample)), sample
    dns = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    for sample in ["my-name", "a", "-a", "a-", "A", "0-0"]:
        assert bool(re.fullmatch(markup_proof(dns), sample)) == bool(re.fullmatch(dns, sample)), sample


def test_the_return_value_is_rank_0s_and_only_from_our_message() -> None:
    from airflow_k8s_ml.kube.resources import replica_name
    from airflow_k8s_ml.operators._task_function import RESULT_KEY, returned_value

    def pod(replica: str, message: str, code: int = 0) -> dict[str, object]:
        terminated = {"exitCode": code, "message": message}
        return {
            "metadata": {
                "name": f"p-{replica}",
                "labels": {
                    "training.kubeflow.org/replica-type": replica.split("-")[0],
                    "training.kubeflow.org/replica-index": replica.split("-")[1],
                },
            },
            "status": {"containerStatuses": [{"name": "pytorch", "state": {"terminated": terminated}}]},
        }

    pods = [pod("worker-0", json.dumps({RESULT_KEY: 2})), pod("master-0", json.dumps({RESULT_KEY: 1}))]
    assert returned_value(pods, replica_name) == (True, 1)
    assert returned_value([pod("master-0", "not json")], replica_name) == (False, None)
    assert returned_value([pod("master-0", json.dumps({RESULT_KEY: 1}), code=1)], replica_name) == (
        False,
        None,
    )
