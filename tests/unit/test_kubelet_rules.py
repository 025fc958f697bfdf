"""Pure rules of the local kubelet and scheduler: phases, messages, expansion, path rewriting, quantities."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from airflow_k8s_ml.k8s import quantities
from airflow_k8s_ml.testbed.local_cluster.kubelet import fit
from airflow_k8s_ml.testbed.local_cluster.kubelet.defaults import (
    apply_pod_defaults,
    default_pull_policy,
    qos_class,
)
from airflow_k8s_ml.testbed.local_cluster.kubelet.envvars import expand, field_value
from airflow_k8s_ml.testbed.local_cluster.kubelet.logfile import parse_line, parse_rfc3339, rfc3339_nano
from airflow_k8s_ml.testbed.local_cluster.kubelet.mounts import mount_table, rewriter
from airflow_k8s_ml.testbed.local_cluster.kubelet.status import (
    ContainerState,
    go_duration,
    merge_conditions,
    pod_phase,
)
from airflow_k8s_ml.testbed.local_cluster.kubelet.validation import validate_pod, validate_update
from airflow_k8s_ml.testbed.local_cluster.settings import NodeCapacity


def _exited(name: str, code: int) -> ContainerState:
    state = ContainerState(name, "img")
    state.begin_instance("local://1", "")
    state.run(1.0)
    state.terminate(code, "Completed" if code == 0 else "Error", 2.0)
    return state


def _running(name: str) -> ContainerState:
    state = ContainerState(name, "img")
    state.begin_instance("local://1", "")
    state.run(1.0)
    return state


def _spec(policy: str, *names: str) -> dict:
    return {"restartPolicy": policy, "containers": [{"name": n} for n in names]}


@pytest.mark.parametrize(
    ("policy", "codes", "terminal", "phase"),
    [
        ("Never", [0, 0], False, "Succeeded"),
        ("Never", [0, 1], False, "Failed"),
        ("OnFailure", [0, 1], False, "Running"),  # the failed one is about to restart
        ("OnFailure", [0, 0], False, "Succeeded"),
        ("Always", [0], False, "Running"),
        ("Always", [143], True, "Failed"),  # deleted: stopped for good
        ("Always", [0], True, "Succeeded"),
    ],
)
def test_pod_phase_of_exited_containers(policy: str, codes: list[int], terminal: bool, phase: str) -> None:
    names = [f"c{i}" for i in range(len(codes))]
    states = [_exited(n, c) for n, c in zip(names, codes, strict=True)]
    assert pod_phase(_spec(policy, *names), [], states, terminal) == phase


def test_pod_phase_pending_running_and_crash_loop() -> None:
    spec = _spec("OnFailure", "a", "b")
    waiting = ContainerState("b", "img")
    assert pod_phase(spec, [], [_running("a"), waiting]) == "Pending"
    crashed = _exited("b", 1)
    crashed.wait("CrashLoopBackOff", "back-off 10s ...")
    assert pod_phase(spec, [], [_running("a"), crashed]) == "Running"
    init_spec = {**spec, "initContainers": [{"name": "i"}]}
    assert (
        pod_phase({**init_spec, "restartPolicy": "Never"}, [_exited("i", 1)], [ContainerState("a", "x")])
        == "Failed"
    )
    assert (
        pod_phase(init_spec, [_running("i")], [ContainerState("a", "x"), ContainerState("b", "x")])
        == "Pending"
    )


def test_restart_count_counts_instances_after_the_first() -> None:
    state = _exited("c", 1)
    assert state.restart_count == 0
    state.wait("CrashLoopBackOff")
    assert state.last_terminated is not None and state.terminated is None
    state.begin_instance("local://2", "")
    state.run(3.0)
    assert state.restart_count == 1 and state.render()["lastState"]["terminated"]["exitCode"] == 1


def test_merge_conditions_keeps_transition_times_and_foreign_conditions() -> None:
    existing = [
        {"type": "Ready", "status": "False", "lastTransitionTime": "2020-01-01T00:00:00Z"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
    ]
    merged = merge_conditions(
        existing,
        [
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
            {"type": "Initialized", "status": "True"},
        ],
        1_700_000_000,
    )
    assert [c["type"] for c in merged] == ["Initialized", "Ready", "PodScheduled"]
    assert merged[1]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert merged[0]["lastTransitionTime"] == "2023-11-14T22:13:20Z"


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.2, "200ms"), (10, "10s"), (80, "1m20s"), (300, "5m0s"), (2.5, "2.5s")]
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_expansion_follows_kubernetes_rules() -> None:
    env = {"A": "x", "B": "y"}
    assert expand("$(A)-$(B)", env) == "x-y"
    assert expand("$(MISSING) $$(A) $A $", env) == "$(MISSING) $(A) $A $"
    assert expand("$(A", env) == "$(A"


def test_field_paths() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "n", "uid": "u", "labels": {"app": "x", "b": "2"}},
        "spec": {"nodeName": "node", "serviceAccountName": "sa"},
        "status": {"podIP": "127.42.0.9", "podIPs": [{"ip": "127.42.0.9"}]},
    }
    assert [
        field_value(pod, p)
        for p in (
            "metadata.name",
            "metadata.labels['app']",
            "metadata.labels['nope']",
            "status.podIPs",
            "spec.serviceAccountName",
        )
    ] == ["p", "x", "", "127.42.0.9", "sa"]
    assert field_value(pod, "metadata.labels") == 'app="x"\nb="2"'


def test_mount_paths_are_rewritten_as_whole_components(tmp_path: Path) -> None:
    container = {
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": "data", "mountPath": "/data/models", "subPath": "m"},
            {"name": "cfg", "mountPath": "/etc/cfg/"},
        ]
    }
    table = mount_table(container, {"data": tmp_path / "d", "cfg": tmp_path / "c"})
    rewrite = rewriter(table)
    assert rewrite("--out=/data/x") == f"--out={tmp_path}/d/x"
    assert rewrite("/data/models/best") == f"{tmp_path}/d/m/best"
    assert rewrite("open('/etc/cfg/app.yaml')") == f"open('{tmp_path}/c/app.yaml')"
    for untouched in ("/data2/x", "s3://bucket/data/x", "http://h:80/data", "/mydata", "./data"):
        assert rewrite(untouched) == untouched


def test_fit_messages_and_requests() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}},
                {"resources": {"requests": {"cpu": "1"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
        }
    }
    assert fit.pod_requests(pod) == {"cpu": Decimal(2), "memory": Decimal(2**30)}
    capacity = fit.node_capacity(NodeCapacity(cpu="1", memory="32Gi", gpus=0, pods=110))
    reasons = fit.insufficient({"cpu": Decimal(2), fit.GPU: Decimal(1)}, {"pods": Decimal(0)}, capacity)
    assert fit.unschedulable_message(reasons) == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu."
    )
    assert fit.rejection({"cpu": Decimal(2)}, {}, capacity) == (
        "OutOfcpu",
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1000",
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("2Gi", Decimal(2 * 2**30)),
        ("1e3", Decimal(1000)),
        ("1.5k", Decimal(1500)),
        (2, Decimal(2)),
    ],
)
def test_quantities(text: object, value: Decimal) -> None:
    assert quantities.parse(text) == value


def test_validation_messages() -> None:
    pod = apply_pod_defaults(
        {
            "spec": {
                "restartPolicy": "Sometimes",
                "containers": [
                    {"name": "a", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
                    {"name": "a", "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
                ],
            }
        }
    )
    assert validate_pod(pod) == [
        (
            "spec.containers[0].resources.limits",
            "FieldValueRequired",
            "Required value: Limit must be set for non overcommitable resources",
        ),
        ("spec.containers[1].name", "FieldValueDuplicate", 'Duplicate value: "a"'),
        ("spec.containers[1].image", "FieldValueRequired", "Required value"),
        ("spec.containers[1].volumeMounts[0].name", "FieldValueNotFound", 'Not found: "v"'),
        (
            "spec.restartPolicy",
            "FieldValueNotSupported",
            'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
        ),
    ]


def test_pod_spec_is_immutable_except_images() -> None:
    old = apply_pod_defaults({"spec": {"containers": [{"name": "a", "image": "x:1", "command": ["a"]}]}})
    new_image = apply_pod_defaults(
        {"spec": {"containers": [{"name": "a", "image": "x:2", "command": ["a"]}]}}
    )
    assert validate_update(new_image, old) == []
    new_command = apply_pod_defaults(
        {"spec": {"containers": [{"name": "a", "image": "x:1", "command": ["b"]}]}}
    )
    assert validate_update(new_command, old)[0][1] == "FieldValueForbidden"


def test_defaults() -> None:
    assert [
        default_pull_policy(i) for i in ("busybox", "busybox:latest", "python:3.11", "r.io/x@sha256:ab")
    ] == ["Always", "Always", "IfNotPresent", "IfNotPresent"]
    guaranteed = {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}
    apply_pod_defaults({"spec": guaranteed})
    assert qos_class(guaranteed) == "Guaranteed"
    assert qos_class({"containers": [{"resources": {"requests": {"cpu": "1"}}}]}) == "Burstable"
    assert qos_class({"containers": [{}]}) == "BestEffort"


def test_cri_log_lines_round_trip() -> None:
    stamp = rfc3339_nano(1_700_000_000_123_456_789)
    assert stamp == "2023-11-14T22:13:20.123456789Z"
    assert parse_rfc3339(stamp) == pytest.approx(1_700_000_000.123456789)
    record = parse_line(f"{stamp} stdout F hello world".encode())
    assert record is not None and record.render(True) == f"{stamp} hello world\n".encode()
    partial = parse_line(f"{stamp} stderr P part".encode())
    assert partial is not None and partial.render(False) == b"part"


def test_pod_ips_are_distinct_and_not_reused_at_once() -> None:
    from airflow_k8s_ml.testbed.local_cluster.kubelet.network import IpAllocator

    ips = IpAllocator(block=42)
    first, second = ips.allocate("a"), ips.allocate("b")
    assert first != second and first.startswith("127.42.") and ips.allocate("a") == first
    ips.release("a")
    assert ips.allocate("c") not in (first, second)
    assert IpAllocator(usable=False).allocate("x") == "127.0.0.1"
