"""PATCH semantics: RFC 7386 merge patch, RFC 6902 JSON patch, strategic merge, Content-Type dispatch."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.patch import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    apply_patch,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)

# ------------------------------------------------------------------------------- JSON merge patch (RFC 7386)


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [  # RFC 7386 Appendix A, in order
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        # Kubernetes-flavoured: lists (containers) are replaced wholesale, labels merge
        (
            {
                "metadata": {"labels": {"a": "1", "b": "2"}},
                "spec": {"containers": [{"name": "x"}, {"name": "y"}]},
            },
            {"metadata": {"labels": {"b": None, "c": "3"}}, "spec": {"containers": [{"name": "z"}]}},
            {"metadata": {"labels": {"a": "1", "c": "3"}}, "spec": {"containers": [{"name": "z"}]}},
        ),
        ({"spec": {"replicas": 1}}, {"spec": {"replicas": 3}}, {"spec": {"replicas": 3}}),
    ],
)
def test_json_merge_patch(target: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy((target, patch))
    assert json_merge_patch(target, patch) == expected
    assert (target, patch) == before


def test_json_merge_patch_result_shares_nothing_with_the_patch() -> None:
    patch = {"spec": {"template": {"x": [1]}}}
    result = json_merge_patch({}, patch)
    result["spec"]["template"]["x"].append(2)
    assert patch == {"spec": {"template": {"x": [1]}}}


# ---------------------------------------------------------------------------------- JSON patch (RFC 6902)


@pytest.mark.parametrize(
    ("doc", "ops", "expected"),
    [  # RFC 6902 Appendix A
        ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
        (
            {"foo": ["bar", "baz"]},
            [{"op": "add", "path": "/foo/1", "value": "qux"}],
            {"foo": ["bar", "qux", "baz"]},
        ),
        ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
        ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
        (
            {"baz": "qux", "foo": "bar"},
            [{"op": "replace", "path": "/baz", "value": "boo"}],
            {"baz": "boo", "foo": "bar"},
        ),
        (
            {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
            [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
            {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
        ),
        (
            {"foo": ["all", "grass", "cows", "eat"]},
            [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
            {"foo": ["all", "cows", "eat", "grass"]},
        ),
        (
            {"baz": "qux", "foo": ["a", 2, "c"]},
            [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
            {"baz": "qux", "foo": ["a", 2, "c"]},
        ),
        (
            {"foo": "bar"},
            [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
            {"foo": "bar", "child": {"grandchild": {}}},
        ),
        (
            {"foo": "bar"},
            [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
            {"foo": "bar", "baz": "qux"},
        ),
        ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
        (
            {"foo": ["bar"]},
            [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
            {"foo": ["bar", ["abc", "def"]]},
        ),
        # more
        (
            {"a/b": 1, "m~n": 2},
            [{"op": "replace", "path": "/a~1b", "value": 3}, {"op": "remove", "path": "/m~0n"}],
            {"a/b": 3},
        ),
        ({"a": [1]}, [{"op": "add", "path": "/a/1", "value": 2}], {"a": [1, 2]}),  # index == len appends
        ({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"}], {"a": {"b": 1}, "c": {"b": 1}}),
        ({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}], {"a": 1}),
        ({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2}),
        ({"a": 1}, [{"op": "add", "path": "", "value": {"c": 3}}], {"c": 3}),
        ({"a": 1}, [{"op": "add", "path": "/a", "value": None}], {"a": None}),  # null is a value
        ({"a": 1}, [{"op": "test", "path": "/a", "value": 1.0}], {"a": 1}),  # JSON numbers compare by value
        (
            {"a": {"x": [1, {"y": True}]}},
            [{"op": "test", "path": "/a", "value": {"x": [1, {"y": True}]}}],
            {"a": {"x": [1, {"y": True}]}},
        ),
        (
            {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "v1"}]}}}},
            [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "v2"}],
            {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "v2"}]}}}},
        ),
        (
            {"metadata": {"labels": {"app": "x"}}},
            [{"op": "add", "path": "/metadata/labels/example.com~1team", "value": "ml"}],
            {"metadata": {"labels": {"app": "x", "example.com/team": "ml"}}},
        ),
        ({"a": 1}, [], {"a": 1}),
    ],
)
def test_json_patch(doc: Any, ops: list[dict[str, Any]], expected: Any) -> None:
    before = copy.deepcopy((doc, ops))
    assert json_patch(doc, ops) == expected
    assert (doc, ops) == before


@pytest.mark.parametrize(
    ("doc", "ops", "fragment", "code"),
    [
        ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], "testing value /baz failed", 422),
        (
            {"foo": "bar"},
            [{"op": "add", "path": "/baz/bat", "value": "qux"}],
            "doc is missing path: /baz/bat",
            422,
        ),
        (
            {"/": 9, "~1": 10},
            [{"op": "test", "path": "/~01", "value": "10"}],
            "testing value /~01 failed",
            422,
        ),
        (
            {"a": True},
            [{"op": "test", "path": "/a", "value": 1}],
            "testing value /a failed",
            422,
        ),  # bool is not 1
        ({"a": 1}, [{"op": "test", "path": "/b", "value": 1}], "missing path: /b", 422),
        ({"a": 1}, [{"op": "remove", "path": "/b"}], "unable to remove nonexistent key: b", 422),
        ({"a": 1}, [{"op": "replace", "path": "/b", "value": 2}], "doc is missing key: /b", 422),
        ({"a": [1]}, [{"op": "replace", "path": "/a/1", "value": 2}], "invalid index: 1", 422),
        ({"a": [1]}, [{"op": "add", "path": "/a/2", "value": 2}], "invalid index: 2", 422),
        ({"a": [1]}, [{"op": "remove", "path": "/a/-"}], "invalid array index '-'", 422),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/01"}], "invalid array index '01'", 422),
        ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}], "into its own child", 422),
        ({"a": 1}, [{"op": "copy", "from": "/x", "path": "/y"}], "missing path: /x", 422),
        ({"a": "s"}, [{"op": "add", "path": "/a/b", "value": 1}], "missing path: /a/b", 422),
        ({"a": 1}, [{"op": "remove", "path": ""}], "whole document", 422),
        ({"a": 1}, [{"op": "frobnicate", "path": "/a"}], "Unexpected kind: frobnicate", 400),
        ({"a": 1}, [{"op": "add", "path": "/b"}], "missing 'value'", 400),
        ({"a": 1}, [{"op": "remove"}], "missing 'path'", 400),
        ({"a": 1}, [{"op": "move", "path": "/b"}], "missing 'from'", 400),
        ({"a": 1}, [{"op": "add", "path": "b", "value": 1}], 'start with "/"', 400),
        ({"a": 1}, ["add"], "operations must be objects", 400),
    ],
)
def test_json_patch_errors(doc: Any, ops: list[Any], fragment: str, code: int) -> None:
    before = copy.deepcopy(doc)
    with pytest.raises(PatchError) as caught:
        json_patch(doc, ops)
    assert fragment in caught.value.message
    assert caught.value.code == code
    assert doc == before


def test_json_patch_is_all_or_nothing() -> None:
    doc = {"a": 1}
    ops = [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 5}]
    with pytest.raises(PatchError):
        json_patch(doc, ops)
    assert doc == {"a": 1}


def test_json_patch_rejects_a_non_list() -> None:
    with pytest.raises(PatchError) as caught:
        json_patch({}, {"op": "add"})  # type: ignore[arg-type]
    assert caught.value.code == 400


def test_json_patch_add_does_not_alias_the_operation_value() -> None:
    value = {"k": [1]}
    result = json_patch({}, [{"op": "add", "path": "/v", "value": value}])
    result["v"]["k"].append(2)
    assert value == {"k": [1]}


# ------------------------------------------------------------------------------------ strategic merge patch


def deployment(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"app": "d"}},
        "spec": {"replicas": 1, "template": {"spec": {"containers": list(containers), **spec}}},
    }


def containers_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["spec"]["template"]["spec"]["containers"]


def pod_patch(**spec: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": spec}}}


NGINX = {"name": "nginx", "image": "nginx:1", "ports": [{"containerPort": 80, "name": "http"}]}
SIDE = {"name": "side", "image": "busybox"}


def smp(target: dict[str, Any], patch: dict[str, Any], kind: str = "Deployment") -> dict[str, Any]:
    """Apply and assert neither input was mutated."""
    before = copy.deepcopy((target, patch))
    result = strategic_merge_patch(target, patch, kind)
    assert (target, patch) == before
    return result


def test_smp_adds_a_container_without_dropping_the_others() -> None:
    """The documented kubectl example; the new item comes first, as a current apiserver orders it."""
    result = smp(deployment(NGINX), pod_patch(containers=[{"name": "redis", "image": "redis"}]))
    assert containers_of(result) == [{"name": "redis", "image": "redis"}, NGINX]


def test_smp_merges_a_container_by_name_in_place() -> None:
    result = smp(deployment(NGINX, SIDE), pod_patch(containers=[{"name": "side", "image": "busybox:2"}]))
    assert containers_of(result) == [NGINX, {"name": "side", "image": "busybox:2"}]
    result = smp(deployment(NGINX, SIDE), pod_patch(containers=[{"name": "nginx", "image": "nginx:2"}]))
    assert containers_of(result) == [{**NGINX, "image": "nginx:2"}, SIDE]


@pytest.mark.parametrize(
    ("field", "live", "patch", "expected"),
    [
        (
            "env",
            [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            [{"name": "B", "value": "3"}],
            [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}],
        ),
        (
            "env",
            [{"name": "A", "value": "1"}],
            [{"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            [
                {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "A", "value": "1"},
            ],
        ),
        (
            "ports",
            [{"containerPort": 80, "name": "http"}, {"containerPort": 443}],
            [{"containerPort": 80, "protocol": "TCP"}],
            [{"containerPort": 80, "name": "http", "protocol": "TCP"}, {"containerPort": 443}],
        ),
        (
            "volumeMounts",
            [{"name": "data", "mountPath": "/data"}, {"name": "cfg", "mountPath": "/etc/cfg"}],
            [{"name": "data2", "mountPath": "/data"}],
            [{"name": "data2", "mountPath": "/data"}, {"name": "cfg", "mountPath": "/etc/cfg"}],
        ),
        (
            "volumeDevices",
            [{"name": "a", "devicePath": "/dev/a"}],
            [{"name": "b", "devicePath": "/dev/a"}],
            [{"name": "b", "devicePath": "/dev/a"}],
        ),
        ("command", ["sleep", "1"], ["sleep", "2"], ["sleep", "2"]),  # primitive lists replace
        (
            "envFrom",
            [{"configMapRef": {"name": "a"}}],
            [{"secretRef": {"name": "b"}}],
            [{"secretRef": {"name": "b"}}],
        ),
    ],
)
def test_smp_container_list_fields(
    field: str, live: list[Any], patch: list[Any], expected: list[Any]
) -> None:
    target = deployment({"name": "c", "image": "i", field: live})
    result = smp(target, pod_patch(containers=[{"name": "c", field: patch}]))
    assert containers_of(result)[0][field] == expected


@pytest.mark.parametrize(
    ("field", "live", "patch", "expected"),
    [
        (
            "volumes",
            [{"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "x"}}],
            [{"name": "b", "configMap": {"name": "y"}}],
            [{"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "y"}}],
        ),
        ("imagePullSecrets", [{"name": "a"}], [{"name": "b"}], [{"name": "b"}, {"name": "a"}]),
        (
            "initContainers",
            [{"name": "init", "image": "a"}],
            [{"name": "init", "image": "b"}],
            [{"name": "init", "image": "b"}],
        ),
        (
            "hostAliases",
            [{"ip": "10.0.0.1", "hostnames": ["a"]}],
            [{"ip": "10.0.0.1", "hostnames": ["b"]}],
            [{"ip": "10.0.0.1", "hostnames": ["b"]}],
        ),
        (
            "tolerations",  # atomic upstream: replaced, not merged
            [{"key": "dedicated", "value": "test-team", "effect": "NoSchedule"}],
            [{"key": "disktype", "value": "ssd", "effect": "NoSchedule"}],
            [{"key": "disktype", "value": "ssd", "effect": "NoSchedule"}],
        ),
    ],
)
def test_smp_pod_spec_list_fields(field: str, live: list[Any], patch: list[Any], expected: list[Any]) -> None:
    result = smp(deployment(NGINX, **{field: live}), pod_patch(**{field: patch}))
    assert result["spec"]["template"]["spec"][field] == expected


def test_smp_ports_key_depends_on_parent() -> None:
    """``ports`` merges by ``port`` in a Service spec but by ``containerPort`` in a container."""
    service = {"kind": "Service", "spec": {"ports": [{"port": 80, "name": "http", "targetPort": 8080}]}}
    result = smp(service, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}, "Service")
    assert result["spec"]["ports"] == [{"port": 80, "name": "http", "targetPort": 9090}]
    result = smp(service, {"spec": {"ports": [{"port": 443, "name": "https"}]}}, "Service")
    assert [p["port"] for p in result["spec"]["ports"]] == [443, 80]


def test_smp_pod_template_is_found_in_every_workload_kind() -> None:
    job = {"spec": {"template": {"spec": {"containers": [dict(NGINX)]}}}}
    result = smp(
        job, {"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "x"}]}}}}, "Job"
    )
    assert containers_of(result) == [{**NGINX, "image": "x"}]
    cron = {
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [dict(NGINX), dict(SIDE)]}}}}}
    }
    patch = {
        "spec": {
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "side", "args": ["x"]}]}}}}
        }
    }
    result = smp(cron, patch, "CronJob")
    assert result["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"] == [
        NGINX,
        {**SIDE, "args": ["x"]},
    ]
    pod = {"spec": {"containers": [dict(NGINX)]}}
    result = smp(pod, {"spec": {"containers": [{"name": "nginx", "image": "y"}]}}, "Pod")
    assert result["spec"]["containers"] == [{**NGINX, "image": "y"}]


def test_smp_status_conditions_merge_by_type() -> None:
    job = {
        "status": {
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Suspended", "status": "False"},
            ]
        }
    }
    patch = {
        "status": {
            "conditions": [{"type": "Suspended", "status": "True"}, {"type": "Complete", "status": "True"}]
        }
    }
    result = smp(job, patch, "Job")
    assert result["status"]["conditions"] == [
        {"type": "SuccessCriteriaMet", "status": "True"},
        {"type": "Suspended", "status": "True"},
        {"type": "Complete", "status": "True"},
    ]
    pod = {"status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}}
    result = smp(
        pod, {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}, "Pod"
    )
    assert result["status"] == {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
    }


def test_smp_container_statuses_are_replaced() -> None:
    pod = {"status": {"containerStatuses": [{"name": "a", "ready": False}, {"name": "b", "ready": False}]}}
    result = smp(pod, {"status": {"containerStatuses": [{"name": "a", "ready": True}]}}, "Pod")
    assert result["status"]["containerStatuses"] == [{"name": "a", "ready": True}]


def test_smp_owner_references_merge_by_uid() -> None:
    obj = {"metadata": {"ownerReferences": [{"uid": "1", "kind": "Job", "name": "a"}]}}
    patch = {
        "metadata": {
            "ownerReferences": [{"uid": "1", "controller": True}, {"uid": "2", "kind": "Job", "name": "b"}]
        }
    }
    result = smp(obj, patch, "Pod")
    assert result["metadata"]["ownerReferences"] == [
        {"uid": "1", "kind": "Job", "name": "a", "controller": True},
        {"uid": "2", "kind": "Job", "name": "b"},
    ]


@pytest.mark.parametrize(
    ("live", "patch", "expected"),
    [
        (["a", "b"], ["b", "c"], ["a", "b", "c"]),
        (["a", "b"], ["b", "b"], ["a", "b"]),
        (["a"], ["c"], ["c", "a"]),  # new items first, like the apiserver
        ([], ["x"], ["x"]),
    ],
)
def test_smp_finalizers_are_a_set(live: list[str], patch: list[str], expected: list[str]) -> None:
    result = smp({"metadata": {"finalizers": live}}, {"metadata": {"finalizers": patch}}, "Job")
    assert result["metadata"]["finalizers"] == expected


def test_smp_delete_from_primitive_list() -> None:
    obj = {"metadata": {"finalizers": ["a", "b", "c"]}}
    result = smp(obj, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zzz"]}}, "Pod")
    assert result["metadata"]["finalizers"] == ["a", "c"]
    combined = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["d"]}}
    assert smp(obj, combined, "Pod")["metadata"]["finalizers"] == ["d", "b", "c"]
    # nothing to delete from: no-op, and the directive never lands in the object
    assert smp({"metadata": {}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, "Pod") == {
        "metadata": {}
    }


def test_smp_null_deletes() -> None:
    target = deployment({**NGINX, "resources": {"limits": {"cpu": "1"}}})
    patch = {
        "metadata": {"labels": {"app": None, "absent": None}},
        "spec": {"template": {"spec": {"containers": [{"name": "nginx", "resources": None}]}}},
    }
    result = smp(target, patch)
    assert result["metadata"]["labels"] == {}
    assert containers_of(result) == [NGINX]


def test_smp_nulls_inside_new_values_are_dropped() -> None:
    result = smp({"spec": {}}, {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": None}}})
    assert result["spec"] == {"strategy": {"type": "Recreate"}}


def test_smp_replace_directive_on_a_map() -> None:
    target = deployment(NGINX, nodeSelector={"a": "1", "b": "2"})
    result = smp(target, pod_patch(nodeSelector={"$patch": "replace", "c": "3"}))
    assert result["spec"]["template"]["spec"]["nodeSelector"] == {"c": "3"}


def test_smp_replace_directive_in_a_list() -> None:
    target = deployment(NGINX, SIDE)
    result = smp(target, pod_patch(containers=[{"$patch": "replace"}, {"name": "only", "image": "x"}]))
    assert containers_of(result) == [{"name": "only", "image": "x"}]


def test_smp_delete_directive_in_a_list() -> None:
    target = deployment(NGINX, SIDE)
    result = smp(target, pod_patch(containers=[{"name": "nginx", "$patch": "delete"}]))
    assert containers_of(result) == [SIDE]
    result = smp(target, pod_patch(containers=[{"name": "gone", "$patch": "delete"}]))
    assert containers_of(result) == [NGINX, SIDE]


def test_smp_delete_directive_on_a_map() -> None:
    target = deployment({**NGINX, "securityContext": {"runAsUser": 0}})
    result = smp(target, pod_patch(containers=[{"name": "nginx", "securityContext": {"$patch": "delete"}}]))
    assert containers_of(result) == [NGINX]


def test_smp_directives_at_the_root() -> None:
    assert smp({"a": 1, "b": 2}, {"$patch": "replace", "c": 3}, "ConfigMap") == {"c": 3}
    assert smp({"a": 1}, {"$patch": "delete"}, "ConfigMap") == {}


def test_smp_set_element_order_reorders_a_merge_list() -> None:
    target = deployment(NGINX, SIDE)
    patch = pod_patch(**{"$setElementOrder/containers": [{"name": "side"}, {"name": "nginx"}]})
    assert containers_of(smp(target, patch)) == [SIDE, NGINX]


def test_smp_set_element_order_places_new_and_changed_items() -> None:
    """What ``kubectl apply`` sends: the full desired order plus only the changed items."""
    target = deployment(NGINX, SIDE)
    patch = pod_patch(
        **{
            "$setElementOrder/containers": [{"name": "nginx"}, {"name": "new"}, {"name": "side"}],
            "containers": [{"name": "new", "image": "n"}, {"name": "side", "image": "busybox:2"}],
        }
    )
    assert [c["name"] for c in containers_of(smp(target, patch))] == ["nginx", "new", "side"]
    assert containers_of(smp(target, patch))[2]["image"] == "busybox:2"


def test_smp_kubectl_three_way_patch_with_nested_directives() -> None:
    """Shape of a client-side ``kubectl apply`` patch: orders at two levels plus a delete directive."""
    live = deployment({"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]})
    container = {
        "name": "a",
        "$setElementOrder/env": [{"name": "Y"}, {"name": "Z"}],
        "env": [{"name": "Z", "value": "3"}, {"name": "X", "$patch": "delete"}],
    }
    patch = pod_patch(**{"$setElementOrder/containers": [{"name": "a"}], "containers": [container]})
    assert containers_of(smp(live, patch)) == [
        {"name": "a", "env": [{"name": "Y", "value": "2"}, {"name": "Z", "value": "3"}]}
    ]


def test_smp_set_element_order_on_primitive_list() -> None:
    obj = {"metadata": {"finalizers": ["a", "b"]}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["b", "c", "a"], "finalizers": ["c"]}}
    assert smp(obj, patch, "Job")["metadata"]["finalizers"] == ["b", "c", "a"]


def test_smp_set_element_order_for_a_list_not_yet_live() -> None:
    patch = pod_patch(
        **{
            "$setElementOrder/volumes": [{"name": "b"}, {"name": "a"}],
            "volumes": [{"name": "b"}, {"name": "a"}],
        }
    )
    assert smp(deployment(NGINX), patch)["spec"]["template"]["spec"]["volumes"] == [
        {"name": "b"},
        {"name": "a"},
    ]


def test_smp_set_element_order_mismatch_is_rejected() -> None:
    patch = pod_patch(
        **{"$setElementOrder/containers": [{"name": "nginx"}], "containers": [{"name": "side", "image": "x"}]}
    )
    with pytest.raises(PatchError, match="doesn't match \\$setElementOrder list"):
        smp(deployment(NGINX, SIDE), patch)


def test_smp_retain_keys_switches_a_union() -> None:
    target = deployment(NGINX)
    target["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}
    result = smp(target, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert result["spec"]["strategy"] == {"type": "Recreate"}


def test_smp_retain_keys_on_a_volume_item() -> None:
    target = deployment(NGINX, volumes=[{"name": "v", "emptyDir": {}}])
    patch = pod_patch(
        volumes=[{"name": "v", "$retainKeys": ["name", "configMap"], "configMap": {"name": "c"}}]
    )
    assert smp(target, patch)["spec"]["template"]["spec"]["volumes"] == [
        {"name": "v", "configMap": {"name": "c"}}
    ]


@pytest.mark.parametrize(
    ("patch", "fragment", "code"),
    [
        (
            {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}},
            "doesn't match retainKeys",
            422,
        ),
        ({"spec": {"strategy": {"$retainKeys": "type"}}}, "invalid patch format of retainKeys", 400),
        (pod_patch(containers=[{"image": "no-name"}]), "does not contain declared merge key: name", 422),
        (pod_patch(containers=[{"$patch": "delete"}]), "does not contain declared merge key: name", 422),
        (pod_patch(containers=[{"name": "x", "$patch": "explode"}]), "unknown patch type: explode", 422),
        (pod_patch(containers=[{"$patch": "merge"}]), "merging lists cannot yet be specified", 422),
        (pod_patch(nodeSelector={"$patch": "explode"}), "unknown patch type: explode", 422),
        (pod_patch(containers=["nginx"]), "list element types are not identical", 422),
        (pod_patch(containers=[["nginx"]]), "lists of lists are not supported", 422),
        (
            pod_patch(**{"$setElementOrder/containers": "nginx"}),
            "invalid patch format of setElementOrder",
            400,
        ),
        (
            {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
            "invalid patch format of primitive list",
            400,
        ),
    ],
)
def test_smp_errors(patch: dict[str, Any], fragment: str, code: int) -> None:
    target = deployment(NGINX)
    target["spec"]["strategy"] = {"type": "RollingUpdate"}
    with pytest.raises(PatchError) as caught:
        smp(target, patch)
    assert fragment in caught.value.message
    assert caught.value.code == code


def test_smp_unknown_kind_merges_maps_and_replaces_lists() -> None:
    job = {
        "metadata": {"finalizers": ["a"], "labels": {"x": "1"}},
        "spec": {
            "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [NGINX]}}}}
        },
    }
    patch = {
        "metadata": {"finalizers": ["b"], "labels": {"y": "2"}},
        "spec": {
            "pytorchReplicaSpecs": {"Master": {"template": {"spec": {"containers": [{"name": "other"}]}}}}
        },
    }
    result = smp(job, patch, "PyTorchJob")
    master = result["spec"]["pytorchReplicaSpecs"]["Master"]
    assert master["replicas"] == 1
    assert master["template"]["spec"]["containers"] == [{"name": "other"}]
    assert result["metadata"] == {"finalizers": ["b", "a"], "labels": {"x": "1", "y": "2"}}


def test_smp_new_values_never_carry_directives() -> None:
    new = {
        "name": "new",
        "$setElementOrder/env": [{"name": "A"}],
        "env": [{"name": "A", "value": "1"}, {"name": "Z", "$patch": "delete"}],
        "securityContext": {"$patch": "delete"},
        "resources": {"$patch": "replace", "limits": {"cpu": "1"}},
    }
    result = smp(deployment(NGINX), pod_patch(containers=[new], affinity={"$retainKeys": ["nodeAffinity"]}))
    assert containers_of(result)[0] == {
        "name": "new",
        "env": [{"name": "A", "value": "1"}],
        "resources": {"limits": {"cpu": "1"}},
    }
    assert result["spec"]["template"]["spec"]["affinity"] == {}
    assert "$" not in json.dumps(result)


def test_smp_type_changes_replace() -> None:
    assert smp({"a": {"b": 1}}, {"a": "x"}, "ConfigMap") == {"a": "x"}
    assert smp({"a": "x"}, {"a": {"b": 1, "c": None}}, "ConfigMap") == {"a": {"b": 1}}
    assert smp({"a": [1]}, {"a": {"b": 1}}, "ConfigMap") == {"a": {"b": 1}}


def test_smp_scale_and_labels_like_the_python_client() -> None:
    """The Python client's default body for ``patch_namespaced_deployment``."""
    result = smp(deployment(NGINX), {"spec": {"replicas": 3}, "metadata": {"labels": {"tier": "web"}}})
    assert result["spec"]["replicas"] == 3
    assert result["metadata"]["labels"] == {"app": "d", "tier": "web"}
    assert containers_of(result) == [NGINX]


def test_smp_rejects_non_object_patch() -> None:
    with pytest.raises(PatchError) as caught:
        strategic_merge_patch({}, [], "Pod")  # type: ignore[arg-type]
    assert caught.value.code == 400


# ------------------------------------------------------------------------------------------- apply_patch


BASE = {
    "metadata": {"name": "d", "labels": {"a": "1"}},
    "spec": {"template": {"spec": {"containers": [NGINX]}}},
}


@pytest.mark.parametrize(
    ("content_type", "body", "check"),
    [
        (JSON_PATCH, b'[{"op": "replace", "path": "/metadata/labels/a", "value": "2"}]', {"a": "2"}),
        (MERGE_PATCH, b'{"metadata": {"labels": {"b": "2"}}}', {"a": "1", "b": "2"}),
        (STRATEGIC_MERGE_PATCH, '{"metadata": {"labels": {"a": null}}}', {}),
        (APPLY_PATCH, b"metadata:\n  labels:\n    c: '3'\n", {"a": "1", "c": "3"}),
        (APPLY_PATCH, b'{"metadata": {"labels": {"c": "3"}}}', {"a": "1", "c": "3"}),
        (
            "application/merge-patch+json; charset=utf-8",
            b'{"metadata": {"labels": {"b": "2"}}}',
            {"a": "1", "b": "2"},
        ),
        ("Application/JSON-Patch+JSON", b"[]", {"a": "1"}),
    ],
)
def test_apply_patch_dispatches_on_content_type(
    content_type: str, body: bytes | str, check: dict[str, str]
) -> None:
    before = copy.deepcopy(BASE)
    result = apply_patch(BASE, body, content_type, "Deployment")
    assert result["metadata"]["labels"] == check
    assert before == BASE


def test_apply_patch_strategic_vs_merge_on_lists() -> None:
    body = json.dumps(pod_patch(containers=[{"name": "redis", "image": "redis"}]))
    strategic = apply_patch(BASE, body, STRATEGIC_MERGE_PATCH, "Deployment")
    merge = apply_patch(BASE, body, MERGE_PATCH, "Deployment")
    assert [c["name"] for c in containers_of(strategic)] == ["redis", "nginx"]
    assert [c["name"] for c in containers_of(merge)] == ["redis"]


def test_server_side_apply_merges_lists_by_key() -> None:
    body = b"spec:\n  template:\n    spec:\n      containers:\n      - name: nginx\n        image: nginx:2\n"
    result = apply_patch(BASE, body, APPLY_PATCH, "Deployment")
    assert containers_of(result) == [{**NGINX, "image": "nginx:2"}]
    created = apply_patch(
        {}, b'{"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}', APPLY_PATCH, "ConfigMap"
    )
    assert created == {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}


@pytest.mark.parametrize(
    ("content_type", "body", "fragment", "code"),
    [
        ("application/json", b"{}", "unknown format", 415),
        ("application/vnd.kubernetes.protobuf", b"", "unknown format", 415),
        (MERGE_PATCH, b"{not json", "error decoding patch", 400),
        (STRATEGIC_MERGE_PATCH, b"[]", "must be a JSON object", 400),
        (MERGE_PATCH, b'"x"', "must be a JSON object", 400),
        (JSON_PATCH, b'{"op": "add"}', "must be a JSON array", 400),
        (JSON_PATCH, b'[{"op": "test", "path": "/metadata/name", "value": "other"}]', "test failed", 422),
        (JSON_PATCH, b'[{"op": "replace", "path": "", "value": [1]}]', "must be a JSON object", 422),
        (APPLY_PATCH, b"a: [unclosed", "error decoding YAML", 400),
        (APPLY_PATCH, b"- just\n- a list\n", "must be a JSON object", 400),
        (MERGE_PATCH, b"\xff\xfe", "not UTF-8", 400),
    ],
)
def test_apply_patch_errors(content_type: str, body: bytes, fragment: str, code: int) -> None:
    with pytest.raises(PatchError) as caught:
        apply_patch(BASE, body, content_type, "Deployment")
    assert fragment in caught.value.message
    assert caught.value.code == code


def test_unsupported_media_type_names_the_type() -> None:
    with pytest.raises(PatchError) as caught:
        apply_patch(BASE, b"{}", "text/plain; charset=utf-8", "Deployment")
    assert caught.value.code == 415
    assert caught.value.content_type == "text/plain"
    assert str(caught.value).startswith("the body of the request was in an unknown format")
