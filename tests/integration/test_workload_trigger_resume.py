"""Across a trigger restart, an adopting retry and an API server that goes away, on the local cluster.

- a trigger stopped mid-stream (what a triggerer restart does to it) and a fresh one built from the same
  serialised kwargs relay each training line exactly once between them: the second resumes after the
  cursor the first persisted on the Job (its kwargs carry none);
- across real ``kill -9``s of the process running the trigger, landing mid-burst at seeded moments
  (``KILL_SEED``), no line is lost and a kill repeats only what docs/waiting.md says it may: the lines
  relayed since the last cursor write began (``MIN_INTERVAL`` plus a write's round trip), the bound of
  ``tests/relay_bound.py``; so does a single trigger killed -9 mid-stream and resumed from the same kwargs;
- cursor writes coalesce (a burst costs two patches) and a clean exit flushes the last one at once;
- a silent workload causes no cursor write;
- a wait whose API server stops answering fails after ``[airflow_k8s_ml] api_unreachable_timeout``, naming
  the endpoint and the last error.

Trigger log lines go through Airflow's structlog logger to the captured stdout (``capfd``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from airflow_k8s_ml.kube.async_client import get_kube
from airflow_k8s_ml.kube.resources import resource_for
from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.kube.watch import WatchRegistry
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.triggers.log_cursor import CURSOR_ANNOTATION, CursorWriter
from airflow_k8s_ml.triggers.workload import WorkloadTrigger
from tests.cluster_fixtures import use_cluster
from tests.relay_bound import REPEAT_WINDOW, beyond_the_bound

from .workload_helpers import in_thread, job, metric, run_trigger, trigger_for

COUNT_TO_30 = "import time\nfor i in range(30):\n    print(f'line {i}', flush=True); time.sleep(0.05)"


def numbers(output: str) -> Counter[int]:
    return Counter(int(n) for n in re.findall(r"\[\w+-\w{5}\] line (\d+)", output))


async def until_output(capfd: pytest.CaptureFixture[str], pattern: str, timeout: float = 20.0) -> str:
    """Read the captured output until ``pattern`` shows up; returns everything read."""
    seen = ""
    deadline = time.monotonic() + timeout
    while re.search(pattern, seen) is None:
        assert time.monotonic() < deadline, f"{pattern!r} never relayed; got {seen[-500:]!r}"
        await asyncio.sleep(0.05)
        seen += capfd.readouterr().out
    return seen


async def test_a_restarted_trigger_relays_each_line_exactly_once(
    client: KubeClient, registry: WatchRegistry, capfd: pytest.CaptureFixture[str]
) -> None:
    obj = await in_thread(client.create, job("chatty", COUNT_TO_30))
    first = trigger_for(obj, try_number=1)
    task = asyncio.create_task(run_trigger(first))
    before = await until_output(capfd, r"\] line 8\b")
    task.cancel()  # the triggerer stops (restart, redistribution): cancel, then cleanup
    await asyncio.gather(task, return_exceptions=True)
    await first.cleanup()
    before += capfd.readouterr().out
    persisted = json.loads(
        (await in_thread(client.get, "batch/v1", "Job", "chatty"))["metadata"]["annotations"][
            CURSOR_ANNOTATION
        ]
    )
    assert persisted["try"] == 1 and len(persisted["streams"]) == 1

    _, kwargs = first.serialize()
    assert kwargs["log_cursor"] is None  # only the cluster remembers where the relay was
    event = await run_trigger(WorkloadTrigger(**json.loads(json.dumps(kwargs))))
    after = capfd.readouterr().out
    assert event.outcome == "succeeded", event.message
    assert "resuming the log relay after the last line relayed for try 1" in after
    first_part, second_part = numbers(before), numbers(after)
    assert first_part and second_part  # the restart really fell in the middle of the stream
    assert first_part + second_part == Counter(range(30))  # each line once, none lost


async def test_cursor_writes_coalesce_and_the_last_is_flushed(
    client: KubeClient, registry: WatchRegistry
) -> None:
    obj = await in_thread(client.create, job("burst", "pass", suspend=True))
    namespace = obj["metadata"]["namespace"]
    cursor: dict[str, dict[str, object]] = {}
    writer = CursorWriter(
        await get_kube(),
        resource_for("batch/v1", "Job"),
        namespace,
        "burst",
        4,
        lambda: cursor,
        logging.getLogger("test"),
        min_interval=60.0,
    )
    for n in range(1, 51):  # a burst of 50 relayed lines
        cursor["burst-abcde"] = {"ts": "2024-05-01T10:00:01.5Z", "n": n}
        writer.mark()
        await asyncio.sleep(0)
    await writer.flush()  # a clean exit: the pending cursor is written at once, not after the interval
    live = await in_thread(client.get, "batch/v1", "Job", "burst")
    value = json.loads(live["metadata"]["annotations"][CURSOR_ANNOTATION])
    assert value == {"try": 4, "streams": {"burst-abcde": {"ts": "2024-05-01T10:00:01.5Z", "n": 50}}}
    assert writer.writes == 2  # the first line at once, then the rest of the burst in one write
    await writer.close()


async def test_a_silent_workload_writes_no_cursor(client: KubeClient, registry: WatchRegistry) -> None:
    obj = await in_thread(client.create, job("quiet", "import time; time.sleep(1)"))
    trigger = trigger_for(obj, try_number=1)
    event = await run_trigger(trigger)
    assert event.outcome == "succeeded", event.message
    assert trigger._logs is not None and trigger._logs.writer is not None
    assert trigger._logs.writer.writes == 0
    live = await in_thread(client.get, "batch/v1", "Job", "quiet")
    assert CURSOR_ANNOTATION not in (live["metadata"].get("annotations") or {})


async def test_an_unreachable_api_server_fails_the_wait_after_the_configured_time(
    fresh_cluster: ClusterThread, registry: WatchRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_cluster(monkeypatch, fresh_cluster.kubeconfig_path, namespace="default")
    monkeypatch.setenv("AIRFLOW__AIRFLOW_K8S_ML__API_UNREACHABLE_TIMEOUT", "1.5")
    client = KubeClient(namespace="default")
    obj = await in_thread(client.create, job("orphan", "pass", suspend=True))
    client.close()
    task = asyncio.create_task(run_trigger(trigger_for(obj, try_number=1), timeout=60))
    deadline = time.monotonic() + 10
    while not any(w.synced for w in registry.watches.values()):  # waiting on a healthy watch
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    endpoint = fresh_cluster.url
    stopping = time.monotonic()  # the budget counts from the first failed request, after this
    await in_thread(fresh_cluster.stop)  # the API server goes away for good
    event = await task
    waited = time.monotonic() - stopping
    assert event.outcome == "error"
    assert event.message.startswith(f"API server {endpoint} unreachable for ")
    assert (
        "(api_unreachable_timeout 1.5s) while waiting for Job default/orphan; last error: " in event.message
    )
    assert "a retry adopts it if so" in event.message
    assert waited >= 1.5


#: One long burst: a line every 10 ms, no quiet spell for a kill to hide in; long enough for three kills
#: on a loaded machine (at 1400 lines the burst once ended before the third kill at a load average of 20).
BURST_LINES = 2400
BURST = f"import time\nfor i in range({BURST_LINES}):\n    print(f'line {{i}}', flush=True); time.sleep(0.01)"
#: Each killed trigger relays at least this long first, so a cursor flushed late (or only at a clean exit)
#: repeats lines older than ``REPEAT_WINDOW`` and fails the test.
RELAY_BEFORE_KILL = REPEAT_WINDOW + 0.5

TRIGGERER = """
import asyncio, json, os, sys, types
import structlog
from airflow_k8s_ml.triggers.workload import WorkloadTrigger

class TriggerLogFile:
    # As Airflow 3's triggerer keeps a trigger's log: one JSON event a line (the log context variables
    # merged in), written and flushed as it comes, in <task log>.trigger.<triggerer job id>.log. A structlog
    # processor just before the console renderer: the console output the test reads is unchanged.
    def __init__(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    def __call__(self, logger, method, event_dict):
        os.write(self.fd, json.dumps(event_dict, default=str).encode() + b"\\n")
        return event_dict

async def main():
    trigger = WorkloadTrigger(**json.loads(sys.argv[1]))
    if len(sys.argv) > 2:  # a task instance whose trigger log files live under the base log folder
        ti = json.loads(sys.argv[2])
        trigger.task_instance = types.SimpleNamespace(**ti)
        base = os.environ["AIRFLOW__LOGGING__BASE_LOG_FOLDER"]
        path = f"{base}/dag_id={ti['dag_id']}/run_id={ti['run_id']}/task_id={ti['task_id']}/attempt=1.log"
        processors = structlog.get_config()["processors"]
        tee = TriggerLogFile(f"{path}.trigger.{sys.argv[3]}.log")
        structlog.configure(processors=[*processors[:-1], tee, processors[-1]])
    async for event in trigger.run():
        print("EVENT", event.payload["outcome"], flush=True)

print("READY", flush=True)  # imports done: started ahead, it runs at once when told (a new triggerer)
sys.stdin.readline()
asyncio.run(main())
"""


class Triggerer:
    """A fresh interpreter running one WorkloadTrigger; its output lines stamped as they arrive."""

    def __init__(self, kwargs: dict[str, object], log_folder: Path | None = None, job: int = 0) -> None:
        ti = {"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1, "try_number": 1}
        ledger = [json.dumps(ti), str(job)] if log_folder is not None else []
        folder = {"AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(log_folder)} if log_folder is not None else {}
        self.process = subprocess.Popen(
            [sys.executable, "-c", TRIGGERER, json.dumps(kwargs), *ledger],
            cwd=Path(__file__).resolve().parents[2],
            # each relayed line reaches us as it is logged
            env={**os.environ, "PYTHONUNBUFFERED": "1", **folder},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self.output: list[tuple[float, str]] = []  # (arrival, line)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put((time.monotonic(), line))
        self.lines.put(None)

    def next_line(self, deadline: float, waiting_for: str) -> tuple[float, str]:
        try:
            item = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            item = None
        tail = "".join(line for _, line in self.output[-20:])
        assert item is not None, (
            f"{waiting_for}: the triggerer ended or went silent; its last output:\n{tail}"
        )
        self.output.append(item)
        return item

    def ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while "READY" not in self.next_line(deadline, "waiting for the triggerer to import")[1]:
            pass

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def relayed(self) -> list[tuple[float, int]]:
        return [(at, int(m.group(1))) for at, line in self.output if (m := LINE.search(line))]

    def kill(self) -> float:
        self.process.send_signal(signal.SIGKILL)  # no cleanup, no flush: the process is gone
        killed = time.monotonic()
        self.process.wait()
        while (item := self.lines.get(timeout=30)) is not None:  # written before it died, still in the pipe
            self.output.append(item)
        return killed


LINE = re.compile(r"\[\w+-\w{5}\] line (\d+)")


@pytest.mark.parametrize("task_log", [False, True], ids=["cursor-only", "task-log-ledger"])
def test_kill_9s_mid_burst_lose_nothing_and_repeat_only_the_documented_window(
    client: KubeClient, namespace: str, tmp_path: Path, task_log: bool
) -> None:
    """Three triggers killed -9 in the middle of a burst (a line every 10 ms), each at a seeded moment with
    no regard for the cursor, then a fourth runs to the end: every line is relayed. Where the try's trigger
    log files can be read (``task_log``, as in Airflow's triggerer), no line is relayed twice; with the
    persisted cursor alone, what a kill repeats is only a tail of what the killed trigger relayed in the last
    ``REPEAT_WINDOW`` seconds."""
    moments = random.Random(int(os.environ.get("KILL_SEED", "28")))
    name = "burstlog" if task_log else "burst"  # one word: LINE reads the pod's prefix as <job>-<5 chars>
    obj = client.create(job(name, BURST, suspend=True))  # starts once the first trigger watches it
    kwargs = {
        "kind": "Job",
        "name": name,
        "namespace": namespace,
        "uid": obj["metadata"]["uid"],
        "task_started_at": time.time(),
        "try_number": 1,
    }
    watchers = metric(client, "apiserver_registered_watchers")
    # all four start now (a fresh interpreter importing Airflow takes seconds): each runs at once when told;
    # each a triggerer job of its own (its own trigger log file)
    waiting = [Triggerer(kwargs, tmp_path / "logs" if task_log else None, job=k) for k in range(4)]
    triggerers = [waiting.pop(0)]
    kills: list[float] = []
    try:
        for triggerer in (*triggerers, *waiting):
            triggerer.ready()
        triggerers[0].go()
        deadline = time.monotonic() + 60
        while metric(client, "apiserver_registered_watchers") < watchers + 1:
            assert time.monotonic() < deadline, "the first trigger never opened its watch"
            time.sleep(0.05)
        client.patch("batch/v1", "Job", name, namespace, {"spec": {"suspend": False}})
        for _ in range(3):
            current = triggerers[-1]
            successor = waiting.pop(0)
            # the moment: a seeded number of new lines after at least RELAY_BEFORE_KILL seconds of relaying
            extra = moments.randint(0, 30)
            deadline = time.monotonic() + 120
            first: float | None = None
            while True:
                at, _ = current.next_line(deadline, "waiting for the trigger to relay lines before the kill")
                got = current.relayed()
                if got and first is None:
                    first = got[0][0]
                if first is not None and at - first >= RELAY_BEFORE_KILL:
                    if extra == 0:
                        break
                    extra -= 1
            assert max(n for _, n in current.relayed()) < BURST_LINES - 50, "the burst ended before the kill"
            kills.append(current.kill())
            successor.go()
            triggerers.append(successor)
        last = triggerers[-1]
        deadline = time.monotonic() + 120
        while "EVENT" not in last.next_line(deadline, "waiting for the last trigger's event")[1]:
            pass
        assert "EVENT succeeded" in last.output[-1][1], last.output[-20:]
    finally:
        for triggerer in (*triggerers, *waiting):
            if triggerer.process.poll() is None:
                triggerer.kill()

    relayed = [t.relayed() for t in triggerers]
    everything = Counter(n for lines in relayed for _, n in lines)
    assert set(everything) == set(range(BURST_LINES)), (
        f"lost: {sorted(set(range(BURST_LINES)) - set(everything))}"
    )
    if task_log:
        doubled = sorted(n for n, count in everything.items() if count > 1)
        assert not doubled, f"{len(doubled)} lines relayed twice across the kills: {doubled[:20]}"
        return
    for k, killed in enumerate(kills):
        problems = beyond_the_bound(killed, relayed[k], relayed[k + 1], expected=())  # losses: above
        assert not problems, f"kill {k + 1}: " + "; ".join(problems)
    assert max(everything.values()) <= 2, everything.most_common(3)


#: A stream long enough to relay ``RELAY_BEFORE_KILL`` seconds and more: a line every 20 ms for 6 s.
STREAM = "import time\nfor i in range(300):\n    print(f'line {i}', flush=True); time.sleep(0.02)"


def test_a_trigger_killed_9_mid_stream_resumes_within_the_documented_bound(
    client: KubeClient, namespace: str
) -> None:
    """The restart above as a crash: the process running the trigger is killed -9 mid-stream (no cancel, no
    cleanup, no cursor flush) at a seeded moment after ``RELAY_BEFORE_KILL`` seconds of relaying; a fresh
    trigger from the same serialised kwargs (no cursor in them) resumes from the cursor on the Job. No line
    is lost, and the repeats are within ``tests/relay_bound.py``'s bound (a late cursor write fails it)."""
    moment = random.Random(int(os.environ.get("KILL_SEED", "28")) + 1).randint(0, 40)
    obj = client.create(job("crashy", STREAM, suspend=True))
    kwargs = {
        "kind": "Job",
        "name": "crashy",
        "namespace": namespace,
        "uid": obj["metadata"]["uid"],
        "task_started_at": time.time(),
        "try_number": 1,
    }
    assert "log_cursor" not in kwargs  # only the cluster remembers where the relay was
    first, second = Triggerer(kwargs), Triggerer(kwargs)
    try:
        first.ready()
        second.ready()
        watchers = metric(client, "apiserver_registered_watchers")
        first.go()
        deadline = time.monotonic() + 60
        while metric(client, "apiserver_registered_watchers") < watchers + 1:
            assert time.monotonic() < deadline, "the first trigger never opened its watch"
            time.sleep(0.05)
        client.patch("batch/v1", "Job", "crashy", namespace, {"spec": {"suspend": False}})
        deadline = time.monotonic() + 60
        while True:
            at, _ = first.next_line(deadline, "waiting for the trigger to relay lines before the kill")
            got = first.relayed()
            if got and at - got[0][0] >= RELAY_BEFORE_KILL and len(got) >= moment:
                break
        assert max(n for _, n in first.relayed()) < 250, "the stream ended before the kill"
        killed = first.kill()
        second.go()
        deadline = time.monotonic() + 120
        while "EVENT" not in second.next_line(deadline, "waiting for the second trigger's event")[1]:
            pass
    finally:
        for triggerer in (first, second):
            if triggerer.process.poll() is None:
                triggerer.kill()
    assert "EVENT succeeded" in second.output[-1][1], second.output[-20:]
    resumed = "resuming the log relay after the last line relayed for try 1"
    assert any(resumed in line for _, line in second.output), second.output[:20]
    problems = beyond_the_bound(killed, first.relayed(), second.relayed(), expected=range(300))
    assert not problems, "; ".join(problems)
