"""The log relay against hostile training output on the local cluster: lines far over the client's limit,
and a flood the relay cannot keep up with. No line may be lost without a line in the log saying so, and the
event loop is never blocked for long (Airflow's triggerer warns from 0.2 s)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from airflow_k8s_ml.kube.async_client import get_kube
from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.triggers.logs import LogRelay
from tests.cluster_fixtures import use_cluster

from .workload_helpers import in_thread, job

LONG_LINES = """
import sys
print("before", flush=True)
print("y" * 200_000, flush=True)
sys.stdout.write("x" * 10_000_000)
for i in range(40):
    print(f"after {i}")
print("final", flush=True)
"""
FLOOD = "for i in range(100_000):\n    print(f'flood {i}')"
#: Airflow's triggerer logs "blocked" from this long a loop stall.
BLOCKED = 0.2


@pytest.fixture()
def client(fresh_cluster: ClusterThread, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeClient]:
    use_cluster(monkeypatch, fresh_cluster.kubeconfig_path, namespace="default")
    client = KubeClient(namespace="default")
    yield client
    client.close()


@contextlib.asynccontextmanager
async def loop_lag() -> AsyncIterator[list[float]]:
    """The longest stall of the event loop while the block runs (a 10 ms ticker's lateness)."""
    worst = [0.0]

    async def tick() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.01)
            worst[0] = max(worst[0], time.perf_counter() - started - 0.01)

    ticker = asyncio.create_task(tick())
    try:
        yield worst
    finally:
        ticker.cancel()


async def _run(relay: LogRelay, client: KubeClient, name: str, drain: float) -> str:
    """Feed the relay the Job's pods (as the trigger's pod watch does) until it succeeded; drain; close."""
    deadline = time.monotonic() + 60
    while True:
        pods = await in_thread(client.pods_of, "Job", name)
        relay.update(pods)
        if pods and pods[0]["status"].get("phase") == "Succeeded":
            break
        assert time.monotonic() < deadline, pods
        await asyncio.sleep(0.1)
    await relay.drain(drain)
    await relay.close()
    return str(pods[0]["metadata"]["name"])


async def test_long_lines_are_cut_with_a_marker_and_never_end_the_stream(
    client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    await in_thread(client.create, job("longlines", LONG_LINES))
    relay = LogRelay(await get_kube(), "default", logging.getLogger("test.long"), reconnect_delay=0.05)
    caplog.set_level(logging.INFO, logger="test.long")
    async with loop_lag() as lag:
        pod = await _run(relay, client, "longlines", 10.0)
    lines = [m for m in caplog.messages if m.startswith(f"[{pod}] ")]
    texts = [m[len(pod) + 3 :] for m in lines]
    assert texts[0] == "before"
    # The count is of the bytes the server sent after the kept text: like a kubelet, the local cluster splits
    # a line into 16 KiB records and stamps each, so the stamps inside the line are counted too.
    assert _cut(texts[1], "y") == pytest.approx(200_000 - 500, rel=0.01)
    assert _cut(texts[2], "x") == pytest.approx(10_000_000 + len("after 0") - 500, rel=0.01)
    assert texts[3:] == [f"after {i}" for i in range(1, 40)] + ["final"]
    assert max(len(m) for m in lines) < 600
    print(f"long lines: worst loop stall {lag[0] * 1000:.0f} ms")
    assert lag[0] < BLOCKED


def _cut(text: str, char: str) -> int:
    """The bytes a cut line's marker says were cut; its kept text must be 500 ``char``."""
    found = re.fullmatch(char * 500 + r" \[\.\.\. ([\d,]+) bytes cut\]", text)
    assert found is not None, text[-60:]
    return int(found.group(1).replace(",", ""))


class SlowHandler(logging.Handler):
    """A task log that takes 1 ms a line (a loaded triggerer's): the relay falls behind a flood."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        time.sleep(0.001)
        self.messages.append(record.getMessage())


async def test_a_flood_the_relay_cannot_keep_up_with_is_counted_in_the_log(client: KubeClient) -> None:
    await in_thread(client.create, job("flood", FLOOD))
    log = logging.getLogger("test.flood")
    handler = SlowHandler()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    relay = LogRelay(await get_kube(), "default", log, reconnect_delay=0.05)
    try:
        async with loop_lag() as lag:
            pod = await _run(relay, client, "flood", 0.5)
    finally:
        log.removeHandler(handler)
    relayed = [int(m.rsplit(" ", 1)[1]) for m in handler.messages if m.startswith(f"[{pod}] flood ")]
    assert relayed == sorted(set(relayed)), "relayed out of order or twice"
    warnings = [m for m in handler.messages if "not relayed" in m]
    counts = [re.search(r"\] ([\d,]+) lines not relayed", m) for m in warnings]
    assert all(counts), warnings
    dropped = sum(int(found.group(1).replace(",", "")) for found in counts if found)
    drained = [m for m in warnings if "drain budget" in m]
    print(f"flood: relayed {len(relayed):,}, not relayed {dropped:,}, worst stall {lag[0] * 1000:.0f} ms")
    assert len(relayed) + dropped == 100_000  # every line is relayed or counted
    assert len(drained) <= 1 and all("nor any later line" not in m for m in drained)  # read to its end
    assert all(f"kubectl logs -n default {pod} -c main" in m for m in warnings)
    # No stall bound here: the in-process cluster's kubelet pumps the flood in this process and holds the
    # GIL for up to 0.8 s; the production tier checks the real triggerer's "blocked" warnings.


def test_a_stream_over_max_streams_is_named(caplog: pytest.LogCaptureFixture) -> None:
    """A pod the relay does not follow is named in the log, once."""

    async def scenario() -> None:
        relay = LogRelay(None, "default", logging.getLogger("test.max"), max_streams=0)
        pod: dict[str, Any] = {
            "metadata": {"name": "p-0", "uid": "u"},
            "spec": {"containers": [{"name": "main"}]},
            "status": {"containerStatuses": [{"name": "main", "state": {"running": {}}}]},
        }
        relay.update([pod])
        relay.update([pod])

    caplog.set_level(logging.INFO, logger="test.max")
    asyncio.run(scenario())
    assert [m for m in caplog.messages if "not relayed" in m] == [
        "[p-0] logs not relayed: the relay follows at most 0 streams; read them with kubectl logs"
    ]


async def test_a_flood_is_written_at_the_pace_and_the_rest_is_counted(client: KubeClient) -> None:
    """Written lines stay within the pace (burst + rate x elapsed): a flooding pod cannot fill the
    triggerer's log channel; what is left out is counted, and the counts add up with what was written."""
    await in_thread(client.create, job("paced", FLOOD))
    log = logging.getLogger("test.paced")
    handler = SlowHandler()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    relay = LogRelay(await get_kube(), "default", log, reconnect_delay=0.05, lines_per_second=50)
    started = time.monotonic()
    try:
        pod = await _run(relay, client, "paced", 10.0)
    finally:
        log.removeHandler(handler)
    elapsed = time.monotonic() - started
    written = [m for m in handler.messages if m.startswith(f"[{pod}] flood ")]
    counted = sum(
        int(found.group(1).replace(",", ""))
        for m in handler.messages
        if (found := re.search(r"\] ([\d,]+) lines not relayed", m))
    )
    assert len(written) <= 50 * 10 + 50 * elapsed + 1, (len(written), elapsed)
    assert len(written) + counted == 100_000
    assert relay.tails[pod][-1] == "flood 99999"  # a failure's last lines are the pod's last lines
