"""``fieldValidation`` as a real API server applies it, for every kind: ``Strict`` (what kubectl sends,
and what our operators ask for) refuses unknown and duplicate fields with 400 and upstream's message
naming the field path, creating nothing; ``Warn`` (the default) creates the object without them and says
so in a ``Warning`` header; ``Ignore`` drops them silently."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from tests.cluster_fixtures import ClusterThread

from .deploy_helpers import deployment, raw_request
from .pytorchjob_helpers import SLEEP, job_body, replica
from .workload_helpers import job

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
Body = dict[str, Any]


def _job(name: str, spec: Body | None = None, container: Body | None = None) -> Body:
    body = job(name, "pass", suspend=True, container=container or {})
    body["spec"].update(spec or {})
    return body


def _deployment(name: str, spec: Body | None = None) -> Body:
    main = {"name": "main", "image": "python:3.11", "command": ["true"]}
    return deployment(name, main, 0, **(spec or {}))


def _pytorchjob(name: str, worker: bool = False, **spec: Any) -> Body:
    body = job_body(name, replica(SLEEP), replica(SLEEP) if worker else None, **spec)
    body["spec"].setdefault("runPolicy", {})["suspend"] = True
    return body


class Kind:
    """How to create, list and read the Warning header for one kind through the official client."""

    def __init__(self, create: Callable[..., Any], names: Callable[[str], list[str]], path: str) -> None:
        self.create = create
        self.names = names
        self.path = path  # the collection's URL, "{ns}" for the namespace


@pytest.fixture()
def kinds(api_client: client.ApiClient, custom: client.CustomObjectsApi) -> dict[str, Kind]:
    batch, apps = client.BatchV1Api(api_client), client.AppsV1Api(api_client)
    return {
        "Job": Kind(
            lambda ns, body, **kw: batch.create_namespaced_job_with_http_info(ns, body, **kw),
            lambda ns: [j.metadata.name for j in batch.list_namespaced_job(ns).items],
            "/apis/batch/v1/namespaces/{ns}/jobs",
        ),
        "Deployment": Kind(
            lambda ns, body, **kw: apps.create_namespaced_deployment_with_http_info(ns, body, **kw),
            lambda ns: [d.metadata.name for d in apps.list_namespaced_deployment(ns).items],
            "/apis/apps/v1/namespaces/{ns}/deployments",
        ),
        "PyTorchJob": Kind(
            lambda ns, body, **kw: custom.create_namespaced_custom_object_with_http_info(
                GROUP, VERSION, ns, PLURAL, body, **kw
            ),
            lambda ns: [
                j["metadata"]["name"]
                for j in custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
            ],
            f"/apis/{GROUP}/{VERSION}/namespaces/{{ns}}/{PLURAL}",
        ),
    }


CASES = [
    pytest.param("Job", _job("bogus", spec={"bogusField": 1}), "spec.bogusField", id="job-spec"),
    pytest.param(
        "Job",
        _job("typo", container={"imagePullPolcy": "Never"}),
        "spec.template.spec.containers[0].imagePullPolcy",
        id="job-container-typo",
    ),
    pytest.param("PyTorchJob", _pytorchjob("bogus", bogusField=1), "spec.bogusField", id="pytorchjob-spec"),
    pytest.param(
        "PyTorchJob",
        _pytorchjob("typo", worker=True, elasticPolicy={"minReplicas": 1, "maxReplica": 2}),
        "spec.elasticPolicy.maxReplica",
        id="pytorchjob-elastic-policy",
    ),
    pytest.param("Deployment", _deployment("bogus", spec={"bogus": 1}), "spec.bogus", id="deployment-spec"),
]


@pytest.mark.parametrize(("kind", "body", "path"), CASES)
def test_strict_refuses_unknown_fields_and_creates_nothing(
    kinds: dict[str, Kind], namespace: str, kind: str, body: Body, path: str
) -> None:
    with pytest.raises(client.ApiException) as refused:
        kinds[kind].create(namespace, body, field_validation="Strict")

    assert refused.value.status == 400
    status = json.loads(refused.value.body)
    assert status["reason"] == "BadRequest"
    assert status["message"] == f'strict decoding error: unknown field "{path}"'
    assert kinds[kind].names(namespace) == []


@pytest.mark.parametrize(("kind", "body", "path"), CASES)
def test_without_strict_the_field_is_dropped_with_a_warning(
    cluster: ClusterThread, kinds: dict[str, Kind], namespace: str, kind: str, body: Body, path: str
) -> None:
    _, code, headers = kinds[kind].create(namespace, body)

    assert code == 201
    assert headers["Warning"] == f'299 - "unknown field \\"{path}\\""'
    assert kinds[kind].names(namespace) == [body["metadata"]["name"]]
    url = kinds[kind].path.format(ns=namespace) + "/" + body["metadata"]["name"]
    stored = json.loads(raw_request(cluster, "GET", url)[2])
    assert (
        _lookup(stored, _without_last(path)) is not None
    )  # the parent is there (we look in the right place)
    assert _last(path) not in _lookup(stored, _without_last(path))


def test_ignore_drops_silently(kinds: dict[str, Kind], namespace: str) -> None:
    _, code, headers = kinds["Job"].create(
        namespace, _job("quiet", spec={"bogusField": 1}), field_validation="Ignore"
    )

    assert code == 201 and "Warning" not in headers


def test_a_pytorchjob_template_is_checked_as_a_pod_template(kinds: dict[str, Kind], namespace: str) -> None:
    body = _pytorchjob("podtypo")
    body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = (
        "Never"
    )

    with pytest.raises(client.ApiException) as refused:
        kinds["PyTorchJob"].create(namespace, body, field_validation="Strict")

    path = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].imagePullPolcy"
    assert json.loads(refused.value.body)["message"] == f'strict decoding error: unknown field "{path}"'
    assert kinds["PyTorchJob"].names(namespace) == []


def test_strict_refuses_duplicate_fields_naming_each_path(
    cluster: ClusterThread, kinds: dict[str, Kind], namespace: str
) -> None:
    raw = json.dumps(_job("dup")).replace('"suspend": true', '"suspend": true, "suspend": false', 1)
    raw = raw.replace('"name": "dup"', '"name": "dup", "name": "dup"', 1)

    url = f"/apis/batch/v1/namespaces/{namespace}/jobs?fieldValidation=Strict"
    code, _, answer = raw_request(cluster, "POST", url, raw.encode(), {"Content-Type": "application/json"})

    assert code == 400
    assert json.loads(answer)["message"] == (
        'strict decoding error: duplicate field "metadata.name", duplicate field "spec.suspend"'
    )
    assert kinds["Job"].names(namespace) == []


def test_strict_applies_to_patches(api_client: client.ApiClient, namespace: str) -> None:
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, _job("patched"))

    with pytest.raises(client.ApiException) as refused:
        batch.patch_namespaced_job(
            "patched", namespace, {"spec": {"backofLimit": 2}}, field_validation="Strict"
        )

    assert refused.value.status == 400
    assert (
        json.loads(refused.value.body)["message"] == 'strict decoding error: unknown field "spec.backofLimit"'
    )
    assert batch.read_namespaced_job("patched", namespace).spec.backoff_limit == 0  # unchanged


def _without_last(path: str) -> str:
    return path.rsplit(".", 1)[0]


def _last(path: str) -> str:
    return path.rsplit(".", 1)[1]


def _lookup(obj: Any, path: str) -> Any:
    """Follow ``a.b[0].c`` into a JSON object."""
    for part in path.split("."):
        name, _, index = part.partition("[")
        obj = obj[name]
        if index:
            obj = obj[int(index.rstrip("]"))]
    return obj
