"""Event-loop stalls caused by our WorkloadTrigger in a fresh process, as a triggerer would see them.

The triggerer warns ``Triggerer's async thread was blocked for X seconds`` when its 100 ms watchdog
oversleeps; one such stall delays every other deferred task of that triggerer. This bench reproduces the
triggerer's situation: a *fresh* interpreter with Airflow imported (what a triggerer has loaded before the
first trigger arrives) imports the trigger class on its loop (``import_string``, as
``TriggerRunner.get_trigger_by_classpath`` does), then runs N triggers concurrently against Jobs of a local
cluster that print numbered lines (so the log relay works too) and finish. A 5 ms ticker records every
oversleep; the report gives the largest stall, the stalls over 50 ms (seconds after the first trigger
arrived, and milliseconds), and where the loop thread was while stalled (a sampler thread reads its stack
every 10 ms once the ticker is 40 ms late; code holding the GIL in C shows no samples).

    python bench/trigger_loop_lag.py [--n 20] [--lines 40] [--period 0.05]

The cluster runs in a child process, the waits in another fresh child, so neither the cluster's CPU nor
this script's own imports count. Loopback only; about 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from _jobs import python_job  # bench/ is on the path of a bench script

ROOT = Path(__file__).resolve().parents[1]
CONN_ID = "kubernetes_default"
BOUND_MS = 50.0


# -- the child: a fresh process measuring its own loop ---------------------------------------------------
class StallSampler(threading.Thread):
    """While the loop has not ticked for over 40 ms, sample the loop thread's stack (what blocks it)."""

    def __init__(self, loop_thread: int) -> None:
        super().__init__(daemon=True)
        self.loop_thread = loop_thread
        self.last_tick = time.monotonic()
        self.samples: Counter[str] = Counter()
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            time.sleep(0.01)
            if time.monotonic() - self.last_tick > 0.04:
                frame = sys._current_frames().get(self.loop_thread)
                if frame is not None:
                    stack = traceback.extract_stack(frame)
                    ours = [f for f in stack if "site-packages" not in f.filename or "import" in f.name]
                    where = " <- ".join(
                        f"{Path(f.filename).name}:{f.lineno}:{f.name}" for f in stack[-4:][::-1]
                    )
                    first = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(ours)), "?")
                    self.samples[f"{first} | {where}"] += 1


async def ticker(
    stalls: list[tuple[float, float, float]],
    stop: asyncio.Event,
    sampler: StallSampler,
    period: float = 0.005,
) -> None:
    """(when, how late, CPU seconds this process used meanwhile) per tick: a late tick with little CPU used
    was the OS running somebody else (a shared machine), not this process blocking its loop."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before, cpu = loop.time(), time.process_time()
        sampler.last_tick = time.monotonic()
        await asyncio.sleep(period)
        late = loop.time() - before - period
        stalls.append((before, late, time.process_time() - cpu))


async def watchdog(blocked: list[tuple[float, float]], stop: asyncio.Event) -> None:
    """Airflow's own check (``TriggerRunner.block_watchdog``): sleep 100 ms, and a wake-up later than
    ``[triggerer] blocked_main_thread_warning_threshold`` (0.2 s) is one "Triggerer's async thread was
    blocked for X seconds" warning. Kept: (X, the CPU seconds this process used meanwhile): a warning
    with little CPU was the OS running another process, not this one holding its loop."""
    from airflow.configuration import conf

    threshold = conf.getfloat("triggerer", "blocked_main_thread_warning_threshold", fallback=0.2)
    while not stop.is_set():
        last, cpu = time.monotonic(), time.process_time()
        await asyncio.sleep(0.1)
        elapsed = time.monotonic() - last
        if elapsed > threshold:
            blocked.append((round(elapsed, 3), round(time.process_time() - cpu, 3)))


SLOW: list[tuple[float, float, str]] = []


def time_callbacks() -> None:
    """Time every loop callback; keep the slow ones (wall ms, CPU ms, which task or callback)."""
    original = asyncio.events.Handle._run
    loop_thread = threading.get_ident()

    def timed(handle: asyncio.events.Handle) -> None:
        if threading.get_ident() != loop_thread:  # a private loop in a worker thread blocks nobody
            original(handle)
            return
        wall, cpu = time.perf_counter(), time.process_time()
        original(handle)
        took = time.perf_counter() - wall
        if took >= 0.02:
            callback = getattr(handle, "_callback", None)
            task = getattr(callback, "__self__", None)
            coro = task.get_coro() if isinstance(task, asyncio.Task) else None
            name = getattr(coro, "__qualname__", None) or getattr(callback, "__qualname__", repr(callback))
            SLOW.append((round(took * 1000, 1), round((time.process_time() - cpu) * 1000, 1), str(name)))

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]


async def child(jobs: list[dict[str, Any]], timeout: float) -> dict[str, Any]:
    from airflow._shared.module_loading import import_string

    loop = asyncio.get_running_loop()
    stalls: list[tuple[float, float, float]] = []
    stop = asyncio.Event()
    sampler = StallSampler(threading.get_ident())
    sampler.start()
    tick = asyncio.create_task(ticker(stalls, stop, sampler))
    blocked: list[tuple[float, float]] = []
    watch = asyncio.create_task(watchdog(blocked, stop))
    await asyncio.sleep(0.2)  # the ticker is running before the first trigger arrives
    t0 = loop.time()
    started = time.perf_counter()
    trigger_class = import_string(
        "airflow_k8s_ml.triggers.workload.WorkloadTrigger"
    )  # on the loop, as Airflow
    import_ms = (time.perf_counter() - started) * 1000
    triggers = [
        trigger_class(
            kind="Job",
            name=job["name"],
            namespace=job["namespace"],
            uid=job["uid"],
            kubernetes_conn_id=CONN_ID,
            task_started_at=time.time(),
        )
        for job in jobs
    ]
    first_event: list[float] = []

    async def run(trigger: Any) -> str:
        async for event in trigger.run():
            first_event.append(loop.time())
            await trigger.cleanup()
            return str(event.payload["outcome"])
        return "none"

    outcomes = await asyncio.wait_for(asyncio.gather(*(run(t) for t in triggers)), timeout)
    stop.set()
    await tick
    await watch
    sampler.stop = True
    from airflow_k8s_ml.kube.async_client import close_all
    from airflow_k8s_ml.kube.watch import get_registry

    await get_registry().close()
    await close_all()
    # every tick overlapping the window (the one spanning the class import started just before t0)
    window = [(at - t0, late * 1000, min(late, cpu) * 1000) for at, late, cpu in stalls if at + late >= t0]
    over = [(round(at, 2), round(ms, 1), round(busy, 1)) for at, ms, busy in window if ms > BOUND_MS]
    lates = sorted(ms for _, ms, _ in window)
    busy = sorted(b for _, _, b in window)
    return {
        "triggers": len(triggers),
        "outcomes": sorted(set(outcomes)),
        "import_ms_on_loop": round(import_ms, 1),
        "max_stall_ms": round(lates[-1], 1) if lates else 0.0,
        "p99_stall_ms": round(lates[int(len(lates) * 0.99) - 1], 1) if lates else 0.0,
        "max_busy_stall_ms": round(busy[-1], 1) if busy else 0.0,
        "blocked_warnings (s, cpu s; Airflow's watchdog)": blocked,
        "stalls_over_50ms (at s, wall ms, busy ms)": over,
        "blocked_in (10 ms samples)": dict(sampler.samples.most_common(12)),
        "slow_callbacks (wall ms, cpu ms, what)": sorted(SLOW, reverse=True)[:12],
        "wall_s": round(loop.time() - t0, 1),
    }


# -- the parent: cluster, Jobs, the child ----------------------------------------------------------------
def job_body(name: str, lines: int, period: float) -> dict[str, Any]:
    code = (
        f"import time\nfor i in range({lines}):\n    print(f'line {{i}}', flush=True); time.sleep({period})"
    )
    return python_job(name, code)


def parent(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.testbed.local_cluster.daemon import ServeOptions, start_background, stop_background

    state = Path(tempfile.mkdtemp(prefix="loop-lag-"))
    try:
        kubeconfig = start_background(ServeOptions(state_dir=state))
        extra = {"kube_config_path": str(kubeconfig), "namespace": "default"}
        env = {
            **os.environ,
            f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps({"conn_type": "kubernetes", "extra": extra}),
        }
        os.environ.update(env)
        client = KubeClient(CONN_ID, "default")
        namespace = f"lag-{int(time.time())}"
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        jobs = []
        for i in range(args.n):
            body = job_body(f"lag-{i}", args.lines, args.period)
            body["metadata"]["namespace"] = namespace
            created = client.create(body)
            jobs.append(
                {
                    "name": created["metadata"]["name"],
                    "namespace": namespace,
                    "uid": created["metadata"]["uid"],
                }
            )
        client.close()
        env["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"  # the relayed lines would drown the report
        out = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(jobs), "--timeout", str(args.timeout)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=args.timeout + 60,
        )
        if out.returncode != 0:
            raise SystemExit(f"child failed:\n{out.stderr[-4000:]}")
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        stop_background(state)
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--period", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import airflow.triggers.base  # noqa: F401  what a triggerer has loaded before its first trigger

        sys.path.insert(0, str(ROOT))
        time_callbacks()
        print(json.dumps(asyncio.run(child(json.loads(args.child), args.timeout))))
        return
    report = parent(args)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
