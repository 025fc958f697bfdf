"""Does the log relay block the triggerer's loop during a flood? Flood vs quiet, side by side, in one run.

The same triggers, in the same kind of process, twice: (a) Jobs whose pods print a 100,000-line flood as
fast as they can, (b) the same Jobs printing 40 lines. Each column is one fresh child process with
Airflow imported that runs the WorkloadTriggers concurrently on its loop, as a triggerer does
(``bench/trigger_loop_lag.py``'s child: ``import_string`` of the class on the loop, a 5 ms ticker, a stack
sampler, the callbacks over 20 ms, and Airflow's own ``block_watchdog``: a 100 ms sleep woken later than
``[triggerer] blocked_main_thread_warning_threshold``, 0.2 s, is one "Triggerer's async thread was blocked
for X seconds" warning). Relayed lines are logged at INFO, as a triggerer logs them into the task log.

    python bench/relay_flood.py [--n 2] [--flood 100000] [--quiet 40]

Prints both columns and the flood/quiet ratio of each figure; the flood column's slow callbacks and
stack samples say where the loop was when it stalled. "busy" is the CPU this process used during a
stall: a stall with little CPU was the OS running another process (a shared machine), not our code.
Loopback only; the cluster runs in its own process. About a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _jobs import python_job  # bench/ is on the path of a bench script

ROOT = Path(__file__).resolve().parents[1]
LAG = Path(__file__).resolve().parent / "trigger_loop_lag.py"
CONN_ID = "kubernetes_default"
RELAYED = re.compile(r"\] (?:flood|line) \d+")
BLOCKED = "blocked_warnings (s, cpu s; Airflow's watchdog)"


def programs(flood: int, quiet: int) -> dict[str, str]:
    """The two columns' pod programs: the same start-up pause, then a flood or a few lines."""
    return {
        "flood": f"import time\ntime.sleep(2)\nfor i in range({flood}):\n    print(f'flood {{i}}')\n",
        "quiet": f"import time\ntime.sleep(2)\nfor i in range({quiet}):\n    print(f'line {{i}}')\n",
    }


def run_column(
    client: Any, env: dict[str, str], name: str, code: str, n: int, timeout: float
) -> dict[str, Any]:
    """Create ``n`` Jobs running ``code`` in a fresh namespace, then wait for all in a fresh child."""
    namespace = f"{name}-{int(time.time())}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    jobs = []
    for i in range(n):
        body = python_job(f"{name}-{i}", code)
        body["metadata"]["namespace"] = namespace
        created = client.create(body)
        jobs.append(
            {"name": created["metadata"]["name"], "namespace": namespace, "uid": created["metadata"]["uid"]}
        )
    out = subprocess.run(
        [sys.executable, str(LAG), "--child", json.dumps(jobs), "--timeout", str(timeout)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout + 60,
    )
    if out.returncode != 0:
        raise SystemExit(f"{name} child failed:\n{out.stderr[-4000:]}")
    log = Path(tempfile.gettempdir()) / f"relay-flood-{name}.log"
    log.write_text(out.stdout + out.stderr)  # what the triggers logged (structlog prints to stdout)
    report = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    report["log"] = str(log)
    logged = (out.stdout + out.stderr).splitlines()
    report["relayed_lines"] = sum(1 for line in logged if RELAYED.search(line))
    report["not_relayed_notes"] = sum(1 for line in logged if "lines not relayed" in line)
    return report


def ratio(flood: float, quiet: float) -> str:
    if quiet == 0:
        return "-" if flood == 0 else "inf"
    return f"{flood / quiet:.2f}x"


def _worst(blocked: list[list[float]], index: int) -> float:
    return max((b[index] for b in blocked), default=0.0)


def _ours(blocked: list[list[float]]) -> int:
    """Warnings during which this process itself used more CPU than the threshold: the loop held by us."""
    return sum(1 for _, cpu in blocked if cpu > 0.2)


def table(reports: dict[str, dict[str, Any]]) -> str:
    flood, quiet = reports["flood"], reports["quiet"]
    blocked = BLOCKED
    rows = [
        ("triggers", flood["triggers"], quiet["triggers"]),
        ("outcomes", ",".join(flood["outcomes"]), ",".join(quiet["outcomes"])),
        ("wall s", flood["wall_s"], quiet["wall_s"]),
        ("relayed lines (task log)", flood["relayed_lines"], quiet["relayed_lines"]),
        ("'lines not relayed' notes", flood["not_relayed_notes"], quiet["not_relayed_notes"]),
        ("'blocked' warnings (> 0.2 s)", len(flood[blocked]), len(quiet[blocked])),
        ("worst 'blocked' s", _worst(flood[blocked], 0), _worst(quiet[blocked], 0)),
        ("  of which our CPU > 0.2 s", _ours(flood[blocked]), _ours(quiet[blocked])),
        ("  most CPU in one (s)", _worst(flood[blocked], 1), _worst(quiet[blocked], 1)),
        ("max loop stall ms", flood["max_stall_ms"], quiet["max_stall_ms"]),
        ("p99 loop stall ms", flood["p99_stall_ms"], quiet["p99_stall_ms"]),
        ("max busy stall ms (our CPU)", flood["max_busy_stall_ms"], quiet["max_busy_stall_ms"]),
        (
            "stalls over 50 ms",
            len(flood["stalls_over_50ms (at s, wall ms, busy ms)"]),
            len(quiet["stalls_over_50ms (at s, wall ms, busy ms)"]),
        ),
    ]
    lines = [f"{'':32} {'flood':>14} {'quiet':>14} {'flood/quiet':>12}"]
    for label, a, b in rows:
        numeric = isinstance(a, (int, float)) and isinstance(b, (int, float))
        lines.append(f"{label:32} {a!s:>14} {b!s:>14} {ratio(float(a), float(b)) if numeric else '':>12}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2, help="triggers (Jobs) per column")
    parser.add_argument("--flood", type=int, default=100_000, help="lines each flood pod prints")
    parser.add_argument("--quiet", type=int, default=40, help="lines each quiet pod prints")
    parser.add_argument("--timeout", type=float, default=240.0)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.testbed.local_cluster.daemon import ServeOptions, start_background, stop_background

    state = Path(tempfile.mkdtemp(prefix="relay-flood-"))
    try:
        kubeconfig = start_background(ServeOptions(state_dir=state, run_as_non_root="warn"))
        extra = {"kube_config_path": str(kubeconfig), "namespace": "default"}
        env = {
            **os.environ,
            f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps({"conn_type": "kubernetes", "extra": extra}),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",  # relayed lines are logged, as in a triggerer
        }
        os.environ.update(env)
        client = KubeClient(CONN_ID, "default")
        reports = {
            name: run_column(client, env, name, code, args.n, args.timeout)
            for name, code in programs(args.flood, args.quiet).items()
        }
        client.close()
    finally:
        stop_background(state)
        shutil.rmtree(state, ignore_errors=True)
    print(table(reports))
    flood = reports["flood"]
    print("\nflood: slow callbacks (wall ms, cpu ms, what):")
    for item in flood["slow_callbacks (wall ms, cpu ms, what)"][:8]:
        print(f"  {item}")
    print("flood: where the loop was while stalled (10 ms samples):")
    for where, count in list(flood["blocked_in (10 ms samples)"].items())[:8]:
        print(f"  {count:4} {where}")
    print(f"\nflood 'blocked' warnings (wall s, our CPU s): {flood[BLOCKED]}")


if __name__ == "__main__":
    main()
