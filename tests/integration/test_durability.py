"""The local cluster keeps its state in the state dir: objects, resourceVersions, watch history and its
identity (token, CA, port) survive a restart and a ``kill -9`` of the server; running pods come back as
after a node reboot."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client, config, watch

from airflow_k8s_ml.kube.resources import resource_for
from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.kube.watch import WatchKey, WatchRegistry
from airflow_k8s_ml.status import classify
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.daemon import (
    ServeOptions,
    alive,
    pid_of,
    start_background,
    stop_background,
)
from tests.cluster_fixtures import fast_settings, use_cluster, wait_for

from .acked_writes import Ledger, write_until_refused
from .test_watch import until
from .workload_helpers import complete, in_thread, job

JOBS = WatchKey("kubernetes_default", resource_for(None, "Job"), "default")


def _core(kubeconfig: Path) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))


def _configmap(name: str, **data: str) -> dict:
    return {"metadata": {"name": name}, "data": data}


def test_restart_keeps_objects_identity_and_watch_history(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with ClusterThread(fast_settings(state)) as first:
        core = _core(first.kubeconfig_path)
        before = core.create_namespaced_config_map("default", _configmap("kept", a="1"))
        core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
        url, token, ca = first.url, first.token, (state / "ca.crt").read_bytes()
        held = before.metadata.resource_version  # what a client's informer holds at the restart
    with ClusterThread(fast_settings(state)) as second:
        assert (second.url, second.token, (state / "ca.crt").read_bytes()) == (url, token, ca)
        # The client made before the restart keeps working: same URL, CA and token.
        found = core.read_namespaced_config_map("kept", "default")
        assert (found.data, found.metadata.resource_version) == ({"a": "1"}, held)
        assert core.read_namespaced_secret("s", "default").data == {"k": "dg=="}
        core.patch_namespaced_config_map("kept", "default", {"data": {"a": "2"}})
        stream = watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=held, timeout_seconds=5
        )
        event = next(stream)
        assert (event["type"], event["object"].metadata.name, event["object"].data) == (
            "MODIFIED",
            "kept",
            {"a": "2"},
        )


#: Each seed picks the moment of a kill: after how many acknowledged writes, then 0-20 ms later.
KILL_SEEDS = (3, 17, 29)
WRITERS = 4


def test_kill_9_of_the_server_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """The daemon `local up` starts, killed with SIGKILL at seeded moments while four writers (real
    ``kubernetes`` clients, a connection each) create, patch and delete ConfigMaps. After each restart every
    write answered 2xx - in this round and the rounds before - is there with the resourceVersion it was
    answered with (so in the same order); a write in flight at the kill either happened or did not; new
    writes get resourceVersions above every survivor."""
    options = ServeOptions(state_dir=tmp_path / "state")
    kubeconfig = start_background(options)
    ledgers: list[Ledger] = []
    try:
        for seed in KILL_SEEDS:
            ledgers.append(_kill_while_writing(options, kubeconfig, seed))
            assert start_background(options) == kubeconfig
            core = _core(kubeconfig)  # a fresh client from the same kubeconfig: same port, CA and token
            listed = {
                cm.metadata.name: (cm.data or {}, int(cm.metadata.resource_version))
                for cm in core.list_namespaced_config_map("default").items
            }
            for book in ledgers:
                assert not book.refused, f"writes answered with an error: {book.refused}"
                mine = {name: state for name, state in listed.items() if name.startswith(f"{book.prefix}-")}
                lost = book.mismatches(mine)
                assert not lost, f"kill {seed}, writes of round {book.prefix}: " + "; ".join(lost)
                assert all(rvs == sorted(set(rvs)) for rvs in book.rvs), "a writer's answers out of order"
            after = core.create_namespaced_config_map("default", _configmap(f"after-{seed}", v="1"))
            newest = max(rv for _, rv in listed.values())
            assert int(after.metadata.resource_version) > newest, "a resourceVersion reused after the crash"
    finally:
        stop_background(options.state_dir)


def _kill_while_writing(options: ServeOptions, kubeconfig: Path, seed: int) -> Ledger:
    """Start the writers, SIGKILL the server at the seed's moment, and return once every writer has seen
    its request fail."""
    rng = random.Random(seed)
    ledger = Ledger(prefix=f"s{seed}")
    writers = [
        threading.Thread(target=write_until_refused, args=(_core(kubeconfig), ledger, w), daemon=True)
        for w in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    kill_after = rng.randint(10, 60)
    wait_for(lambda: ledger.count >= kill_after, what=f"{kill_after} acknowledged writes (seed {seed})")
    time.sleep(rng.uniform(0, 0.02))
    pid = pid_of(options.state_dir)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: _gone(pid), what="the killed server to exit")
    for writer in writers:
        writer.join(timeout=60)
        assert not writer.is_alive(), f"a writer did not see the server die (seed {seed})"
    return ledger


def _gone(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our child (the daemon was started from here)
    return not alive(pid)


def _sleeper(name: str, restart_policy: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "300"]}],
        },
    }


def test_running_pods_come_back_as_after_a_node_reboot(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with ClusterThread(fast_settings(state)) as first:
        core = _core(first.kubeconfig_path)
        core.create_namespaced_pod("default", _sleeper("always", "Always"))
        core.create_namespaced_pod("default", _sleeper("never", "Never"))
        for name in ("always", "never"):
            wait_for(lambda n=name: core.read_namespaced_pod(n, "default").status.phase == "Running")
    with ClusterThread(fast_settings(state)) as second:
        core = _core(second.kubeconfig_path)
        # restartPolicy Never: the container the node lost ends the pod, Failed.
        never = core.read_namespaced_pod("never", "default")
        terminated = never.status.container_statuses[0].state.terminated
        assert never.status.phase == "Failed"
        assert (terminated.reason, terminated.exit_code) == ("ContainerStatusUnknown", 137)
        assert terminated.message == "The container could not be located when the pod was terminated"
        # restartPolicy Always: a new sandbox, the container starts again, one restart counted.
        always = wait_for(
            lambda: core.read_namespaced_pod("always", "default"),
            lambda p: p.status.container_statuses[0].state.running is not None,
            what="the Always pod running again",
        )
        status = always.status.container_statuses[0]
        assert status.restart_count == 1
        assert (status.last_state.terminated.reason, status.last_state.terminated.exit_code) == (
            "ContainerStatusUnknown",
            137,
        )
        reasons = [
            e.reason
            for e in core.list_namespaced_event("default").items
            if e.involved_object.name == "always"
        ]
        assert "SandboxChanged" in reasons


async def test_a_wait_across_a_restart_resumes_by_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: WatchRegistry
) -> None:
    """An operator's deferred wait (the shared watch) loses its connection when the server restarts,
    reconnects to the same URL with the same CA and token, and resumes from its resourceVersion."""
    state = tmp_path / "state"
    first = ClusterThread(fast_settings(state)).start()
    use_cluster(monkeypatch, first.kubeconfig_path, namespace="default")
    kube = KubeClient(namespace="default")
    second = None
    try:
        await in_thread(kube.create, job("across", "pass", suspend=True))
        wake = asyncio.Event()
        async with registry.subscribe(JOBS, "across", wake) as sub:
            await until(lambda: sub.synced and sub.get("across") is not None)
            await in_thread(first.stop)
            second = await in_thread(lambda: ClusterThread(fast_settings(state)).start())
            assert second.url == first.url
            await in_thread(complete, kube, "across", "default")
            await until(lambda: classify(sub.get("across") or {}).succeeded, timeout=20)
            stats = registry.watches[JOBS].stats
            assert stats["lists"] == 1 and stats["expired"] == 0  # resumed, never re-listed
    finally:
        kube.close()
        first.stop()
        if second is not None:
            second.stop()
