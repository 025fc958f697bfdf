"""The local cluster's REST semantics, driven by the official ``kubernetes`` client over HTTPS."""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.error
import urllib.request

import pytest
from kubernetes import client, watch
from kubernetes.dynamic import DynamicClient

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

from ..cluster_fixtures import fast_settings


def _cm(name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data or {"k": "v"}}


def _body(exc: client.ApiException) -> dict:
    return json.loads(exc.body)


def test_crud_round_trip(core: client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_config_map(namespace, _cm("settings", {"app": "train"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.creation_timestamp is not None

    fetched = core.read_namespaced_config_map("settings", namespace)
    assert fetched.data == {"k": "v"}

    fetched.data["k"] = "v2"
    replaced = core.replace_namespaced_config_map("settings", namespace, fetched)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)

    names = [i.metadata.name for i in core.list_namespaced_config_map(namespace).items]
    assert names == ["settings"]

    status = core.delete_namespaced_config_map("settings", namespace)
    assert status.status == "Success"
    with pytest.raises(client.ApiException) as err:
        core.read_namespaced_config_map("settings", namespace)
    assert err.value.status == 404


def test_error_bodies_are_real_status_objects(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    core.create_namespaced_config_map(namespace, _cm("dup"))
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_config_map(namespace, _cm("dup"))
    body = _body(err.value)
    assert (err.value.status, body["reason"], body["message"]) == (
        409,
        "AlreadyExists",
        'configmaps "dup" already exists',
    )
    assert body["kind"] == "Status" and body["details"] == {"name": "dup", "kind": "configmaps"}

    with pytest.raises(client.ApiException) as err:
        batch.read_namespaced_job("pi", namespace)
    body = _body(err.value)
    assert (err.value.status, body["reason"], body["message"]) == (
        404,
        "NotFound",
        'jobs.batch "pi" not found',
    )
    assert body["details"]["group"] == "batch"

    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_config_map(namespace, _cm("Bad_Name"))
    body = _body(err.value)
    assert err.value.status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith(
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"'
    )
    assert body["details"]["causes"][0]["field"] == "metadata.name"


def test_stale_resource_version_conflicts(core: client.CoreV1Api, namespace: str) -> None:
    first = core.create_namespaced_config_map(namespace, _cm("cfg"))
    core.patch_namespaced_config_map("cfg", namespace, {"data": {"k": "new"}})
    first.data = {"k": "stale"}
    with pytest.raises(client.ApiException) as err:
        core.replace_namespaced_config_map("cfg", namespace, first)
    body = _body(err.value)
    assert err.value.status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "cfg": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_label_and_field_selectors(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, _cm("a", {"tier": "train", "gpu": "yes"}))
    core.create_namespaced_config_map(namespace, _cm("b", {"tier": "serve"}))
    core.create_namespaced_config_map(namespace, _cm("c", {"tier": "batch", "gpu": "no"}))

    def names(**kw: str) -> list[str]:
        return sorted(i.metadata.name for i in core.list_namespaced_config_map(namespace, **kw).items)

    assert names(label_selector="tier=train") == ["a"]
    assert names(label_selector="tier!=train") == ["b", "c"]
    assert names(label_selector="gpu") == ["a", "c"]
    assert names(label_selector="!gpu") == ["b"]
    assert names(label_selector="tier in (train, batch)") == ["a", "c"]
    assert names(label_selector="tier notin (train),gpu") == ["c"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector="metadata.name!=b") == ["a", "c"]
    with pytest.raises(client.ApiException) as err:
        core.list_namespaced_config_map(namespace, field_selector="data.k=v")
    assert err.value.status == 400 and _body(err.value)["message"] == "field label not supported: data.k"


def test_every_patch_type(api_client: client.ApiClient, namespace: str) -> None:
    apps = client.AppsV1Api(api_client)
    labels = {"app": "p"}
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "python:3.11",
                                "command": ["true"],
                                "env": [{"name": "A", "value": "1"}],
                            }
                        ]
                    },
                },
            },
        },
    )
    # Strategic merge (the Python client's default for dict bodies): env merges by name.
    patched = apps.patch_namespaced_deployment(
        "p",
        namespace,
        {
            "spec": {
                "template": {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}}
            }
        },
    )
    assert [e.name for e in patched.spec.template.spec.containers[0].env] == ["B", "A"]
    # JSON merge patch: a null deletes the key, lists are replaced.
    api_client.call_api(
        f"/apis/apps/v1/namespaces/{namespace}/deployments/p",
        "PATCH",
        header_params={"Content-Type": "application/merge-patch+json", "Accept": "application/json"},
        body={"metadata": {"labels": {"a": None, "b": "2"}}},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    assert apps.read_namespaced_deployment("p", namespace).metadata.labels == {"b": "2"}
    # JSON patch (a list body makes the client pick application/json-patch+json).
    patched = apps.patch_namespaced_deployment(
        "p",
        namespace,
        [
            {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}},
            {"op": "replace", "path": "/metadata/labels/b", "value": "3"},
        ],
    )
    assert patched.metadata.annotations["x"] == "y" and patched.metadata.labels == {"b": "3"}
    with pytest.raises(client.ApiException) as err:
        apps.patch_namespaced_deployment(
            "p", namespace, [{"op": "test", "path": "/metadata/labels/b", "value": "9"}]
        )
    assert err.value.status == 422


def test_strict_field_validation_and_protobuf(api_client: client.ApiClient, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    with pytest.raises(client.ApiException) as err:
        api_client.call_api(
            path,
            "POST",
            query_params=[("fieldValidation", "Strict")],
            header_params={"Content-Type": "application/json"},
            body={"metadata": {"name": "x"}, "data": {}, "spec": {"foo": 1}},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    assert err.value.status == 400
    assert _body(err.value)["message"] == 'strict decoding error: unknown field "spec"'
    with pytest.raises(client.ApiException) as err:
        api_client.call_api(
            path,
            "POST",
            header_params={"Content-Type": "application/vnd.kubernetes.protobuf"},
            body="x",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    # Protobuf is read for built-in kinds (kubectl create sends it); this body is not protobuf.
    assert err.value.status == 400
    assert "expected prefix [107 56 115 0]" in _body(err.value)["message"]


def _raw_watch(api_client: client.ApiClient, path: str, **query: str) -> list[dict]:
    response = api_client.call_api(
        path,
        "GET",
        query_params=list({"watch": "true", **query}.items()),
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return [json.loads(line) for line in response.data.decode().splitlines() if line.strip()]


def test_watch_resume_sends_only_later_changes(
    core: client.CoreV1Api, api_client: client.ApiClient, namespace: str
) -> None:
    core.create_namespaced_config_map(namespace, _cm("one"))
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, _cm("two"))
    core.delete_namespaced_config_map("one", namespace)
    events = _raw_watch(
        api_client, f"/api/v1/namespaces/{namespace}/configmaps", resourceVersion=rv, timeoutSeconds="1"
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "two"),
        ("DELETED", "one"),
    ]
    deleted_rv = int(events[1]["object"]["metadata"]["resourceVersion"])
    assert deleted_rv > int(events[0]["object"]["metadata"]["resourceVersion"])
    # Without a resourceVersion: synthetic ADDED for the current state, never a BOOKMARK unasked.
    events = _raw_watch(api_client, f"/api/v1/namespaces/{namespace}/configmaps", timeoutSeconds="1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "two")]


def test_watch_selector_transitions(
    core: client.CoreV1Api, api_client: client.ApiClient, namespace: str
) -> None:
    core.create_namespaced_config_map(namespace, _cm("m", {"state": "on"}))
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.patch_namespaced_config_map("m", namespace, {"metadata": {"labels": {"state": "off"}}})
    core.patch_namespaced_config_map("m", namespace, {"metadata": {"labels": {"state": "on"}}})
    events = _raw_watch(
        api_client,
        f"/api/v1/namespaces/{namespace}/configmaps",
        resourceVersion=rv,
        labelSelector="state=on",
        timeoutSeconds="1",
    )
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]


def test_watch_410_expired_is_an_error_event(tmp_path) -> None:
    with ClusterThread(fast_settings(tmp_path / "c")) as c:
        from kubernetes import config

        api = config.new_client_from_config(config_file=str(c.kubeconfig_path))
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map("default", _cm("x"))
        old_rv = core.list_namespaced_config_map("default").metadata.resource_version
        core.patch_namespaced_config_map("x", "default", {"data": {"k": "2"}})
        c.call(c.cluster.store.expire_history)  # the history holding that patch is gone
        events = _raw_watch(
            api, "/api/v1/namespaces/default/configmaps", resourceVersion=old_rv, timeoutSeconds="2"
        )
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        status = events[0]["object"]
        assert (status["code"], status["reason"]) == (410, "Expired")
        assert status["message"].startswith(f"too old resource version: {old_rv} (")
        # The official client's Watch surfaces it as an ApiException 410, which callers use to re-list.
        with pytest.raises(client.ApiException) as err:
            for _ in watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=old_rv, timeout_seconds=2
            ):
                pass
        assert err.value.status == 410
        api.close()


def test_bookmarks_only_when_asked(tmp_path) -> None:
    with ClusterThread(fast_settings(tmp_path / "c", bookmark_interval=0.2)) as c:
        from kubernetes import config

        api = config.new_client_from_config(config_file=str(c.kubeconfig_path))
        path = "/api/v1/namespaces/default/configmaps"
        asked = _raw_watch(api, path, allowWatchBookmarks="true", timeoutSeconds="1")
        assert asked and all(e["type"] == "BOOKMARK" for e in asked)
        assert asked[0]["object"]["metadata"]["resourceVersion"]
        unasked = _raw_watch(api, path, timeoutSeconds="1")
        assert unasked == []
        api.close()


def test_watch_streams_live_changes_with_official_watch(core: client.CoreV1Api, namespace: str) -> None:
    def writer() -> None:
        core.create_namespaced_config_map(namespace, _cm("live"))
        core.patch_namespaced_config_map("live", namespace, {"data": {"k": "2"}})
        core.delete_namespaced_config_map("live", namespace)

    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    thread = threading.Timer(0.2, writer)
    thread.start()
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=5):
        seen.append(event["type"])
        if event["type"] == "DELETED":
            w.stop()
    thread.join()
    assert seen == ["ADDED", "MODIFIED", "DELETED"]


def test_dynamic_client_discovery(api_client: client.ApiClient, namespace: str) -> None:
    dyn = DynamicClient(api_client)
    jobs = dyn.resources.get(api_version="batch/v1", kind="Job")
    assert jobs.namespaced and jobs.name == "jobs"
    assert dyn.resources.get(api_version="kubeflow.org/v1", kind="PyTorchJob").name == "pytorchjobs"
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    cms.create(body=_cm("dyn"), namespace=namespace)
    assert cms.get(name="dyn", namespace=namespace).data.k == "v"


async def test_async_client_crud_and_watch(cluster: ClusterThread, namespace: str) -> None:
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig
    from kubernetes_asyncio import watch as awatch

    api = await aconfig.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    async with api:
        core = aclient.CoreV1Api(api)
        await core.create_namespaced_config_map(namespace, _cm("async"))
        rv = (await core.list_namespaced_config_map(namespace)).metadata.resource_version
        await core.patch_namespaced_config_map("async", namespace, {"data": {"k": "2"}})
        w = awatch.Watch()
        events = []
        async with w.stream(
            core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=1
        ) as stream:
            async for event in stream:
                events.append((event["type"], event["object"].data))
        assert events == [("MODIFIED", {"k": "2"})]
        with pytest.raises(aclient.ApiException) as err:
            await core.read_namespaced_config_map("missing", namespace)
        assert err.value.status == 404


def test_injected_429_carries_retry_after(fresh_cluster: ClusterThread) -> None:
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(fresh_cluster.kubeconfig_path))
    core = client.CoreV1Api(api)
    fresh_cluster.call(
        lambda: fresh_cluster.cluster.faults.configure(
            {
                "rules": [
                    {"verbs": "LIST", "resources": "configmaps", "code": 429, "retry_after": 2, "limit": 1}
                ]
            }
        )
    )
    # urllib3 (under the official client) honours Retry-After on 429 and retries by itself.
    started = time.monotonic()
    assert core.list_namespaced_config_map("default").items == []
    assert time.monotonic() - started >= 1.9
    # A client that does not retry sees the 429 and its header.
    fresh_cluster.call(
        lambda: fresh_cluster.cluster.faults.configure(
            {"rules": [{"verbs": "LIST", "resources": "secrets", "code": 429, "retry_after": 2, "limit": 1}]}
        )
    )
    ctx = ssl.create_default_context(cafile=str(fresh_cluster.kubeconfig_path.parent / "ca.crt"))
    request = urllib.request.Request(
        fresh_cluster.url + "/api/v1/namespaces/default/secrets",
        headers={"Authorization": f"Bearer {fresh_cluster.token}"},
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, context=ctx, timeout=5)
    assert err.value.code == 429 and err.value.headers["Retry-After"] == "2"
    assert json.loads(err.value.read())["reason"] == "TooManyRequests"
    metrics = api.call_api(
        "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True
    ).data.decode()
    assert 'apiserver_request_total{verb="LIST",resource="configmaps",code="429"} 1' in metrics
    assert 'apiserver_request_total{verb="LIST",resource="configmaps",code="200"} 1' in metrics
    api.close()
