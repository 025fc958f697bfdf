"""The protobuf reader of the local cluster against bodies encoded here the way gogo-protobuf encodes them
(every non-pointer field written, zero or not; pointers only when set)."""

from __future__ import annotations

import base64

import pytest

from airflow_k8s_ml.testbed.local_cluster.protobuf.wire import (
    MAGIC,
    ProtobufError,
    UnknownKind,
    decode_object,
    message_for,
)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _bytes(1, api_version) + _bytes(2, kind)
    return MAGIC + _bytes(1, type_meta) + _bytes(2, raw) + _bytes(3, "") + _bytes(4, "")


def _meta(name: str) -> bytes:
    # ObjectMeta: name=1, generateName=2 (non-pointer: written empty), creationTimestamp=8 (zero Time).
    return _bytes(1, name) + _bytes(2, "") + _bytes(8, b"") + _bytes(11, _bytes(1, "app") + _bytes(2, "x"))


def test_job_keeps_a_pointer_zero_and_drops_non_pointer_zeros() -> None:
    container = (
        _bytes(1, "main") + _bytes(2, "python") + _bytes(3, "python") + _bytes(3, "-c") + _bytes(5, "")
    )
    pod_spec = _bytes(2, container) + _bytes(3, "Never") + _int(4, 30)
    template = _bytes(1, _meta("t")) + _bytes(2, pod_spec)
    # JobSpec: parallelism=1 (pointer), backoffLimit=7 (pointer, zero), template=6, suspend=10 (pointer false)
    job_spec = _int(1, 1) + _int(7, 0) + _bytes(6, template) + _int(10, 0)
    job = _bytes(1, _meta("pi")) + _bytes(2, job_spec) + _bytes(3, b"")
    obj = decode_object(_envelope("batch/v1", "Job", job))
    assert obj["apiVersion"] == "batch/v1" and obj["kind"] == "Job"
    assert obj["metadata"] == {"name": "pi", "labels": {"app": "x"}}  # no "", no null timestamp
    assert obj["spec"]["backoffLimit"] == 0  # a pointer's zero is the user's
    assert obj["spec"]["suspend"] is False
    assert obj["spec"]["parallelism"] == 1
    pod = obj["spec"]["template"]["spec"]
    assert pod["containers"] == [{"name": "main", "image": "python", "command": ["python", "-c"]}]
    assert pod["restartPolicy"] == "Never" and pod["terminationGracePeriodSeconds"] == 30
    assert obj["status"] == {}


def test_secret_bytes_are_base64_and_negative_ints_sign_extend() -> None:
    entry = _bytes(1, "password") + _bytes(2, b"s3cret\x00")
    secret = _bytes(1, _meta("creds")) + _bytes(2, entry) + _bytes(3, "Opaque")
    obj = decode_object(_envelope("v1", "Secret", secret))
    assert obj["data"] == {"password": base64.b64encode(b"s3cret\x00").decode()}
    assert obj["type"] == "Opaque"
    # DeploymentSpec.replicas is an int32: -1 arrives as a ten-byte varint and must read back as -1.
    deployment = _bytes(1, _meta("web")) + _bytes(2, _int(1, -1))
    assert decode_object(_envelope("apps/v1", "Deployment", deployment))["spec"]["replicas"] == -1


def test_special_types_render_as_go_renders_them() -> None:
    # Service port: targetPort is an IntOrString (type 1 = string); a Time in a condition.
    port = _bytes(1, "http") + _int(3, 80) + _bytes(4, _int(1, 1) + _bytes(3, "web"))
    service = _bytes(1, _meta("svc")) + _bytes(2, _bytes(1, port))
    obj = decode_object(_envelope("v1", "Service", service))
    assert obj["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "web"}]
    stamp = _bytes(8, _int(1, 1_767_225_600))  # creationTimestamp 2026-01-01T00:00:00Z
    namespace = _bytes(1, _bytes(1, "ns") + stamp)
    assert decode_object(_envelope("v1", "Namespace", namespace))["metadata"] == {
        "name": "ns",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }


def test_messages_and_refusals() -> None:
    assert message_for("v1", "Pod") == "k8s.io.api.core.v1.Pod"
    assert message_for("rbac.authorization.k8s.io/v1", "Role") == "k8s.io.api.rbac.v1.Role"
    assert message_for("authorization.k8s.io/v1", "SelfSubjectAccessReview") == (
        "k8s.io.api.authorization.v1.SelfSubjectAccessReview"
    )
    with pytest.raises(ProtobufError, match=r"expected prefix \[107 56 115 0\]"):
        decode_object(b'{"kind": "Pod"}')
    with pytest.raises(UnknownKind, match=r"kubeflow\.org/v1, Kind=PyTorchJob"):
        decode_object(_envelope("kubeflow.org/v1", "PyTorchJob", b""))
    with pytest.raises(ProtobufError, match="truncated"):
        decode_object(_envelope("v1", "ConfigMap", _bytes(1, b"")[:-1] + b"\x0a\x05ab"))
