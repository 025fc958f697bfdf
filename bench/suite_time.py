"""Test modules' time before and after a change, side by side: the same modules from a git ref's tree and
from this checkout, run at the same moment so both see the same machine load.

What it prints, per group of test paths: for each tree, the wall time, the CPU time (user + system of
pytest and every process it waited for: the local cluster's pods, ``airflow`` CLI runs, pip) and
pytest's last line (passed/failed counts). On a machine shared with other work the wall time swings with
the load; the CPU time is the steadier figure, and what running things side by side saves shows only in
the wall time.

Method: ``git archive REF`` is unpacked into a temp dir (the "before" tree); for each group, one
``pytest -q -p no:cacheprovider -m "not slow"`` per tree is started at once, each with its tree first on
PYTHONPATH and its own temp dir, and reaped with ``os.wait4`` for its resource usage. Bounded:
``--timeout`` (default 1800 s) per group kills both runs' process groups. The temp dirs are removed.

    python bench/suite_time.py --before main tests/integration/test_examples.py \\
        tests/integration/test_cncf_operators.py+tests/integration/test_import_errors_cli.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _unpack(ref: str, into: Path) -> None:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)


def _start(tree: Path, paths: list[str], log: Path) -> subprocess.Popen[bytes]:
    tmp = log.with_suffix(".tmp")
    tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tree), "TMPDIR": str(tmp)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *paths]
    with log.open("wb") as out:
        return subprocess.Popen(
            command, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _summary(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _reap_all(
    procs: dict[str, subprocess.Popen[bytes]], started: float, deadline: float
) -> dict[str, tuple[float, float]]:
    """Each run's wall and CPU seconds, waiting for all at once (each wall time is its own); past the
    deadline, what still runs is killed with its process group."""
    done: dict[str, tuple[float, float]] = {}
    while len(done) < len(procs):
        for name, proc in procs.items():
            if name in done:
                continue
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
            pid, _status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = 0  # reaped here: keep Popen from waiting again
                done[name] = (time.monotonic() - started, usage.ru_utime + usage.ru_stime)
        time.sleep(0.5)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", default="main", help="the git ref of the 'before' tree")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per group")
    parser.add_argument("groups", nargs="+", help="test paths; join several into one run with '+'")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="suite-time-"))
    try:
        before = work / "before"
        before.mkdir()
        _unpack(args.before, before)
        trees = {f"before ({args.before})": before, "after (this checkout)": REPO}
        print(f"{'tests':60} {'tree':24} {'wall s':>8} {'CPU s':>8}  pytest", flush=True)
        for index, group in enumerate(args.groups):
            started = time.monotonic()
            logs = {name: work / f"{index}-{n}.log" for n, name in enumerate(trees)}
            procs = {name: _start(tree, group.split("+"), logs[name]) for name, tree in trees.items()}
            for name, (wall, cpu) in _reap_all(procs, started, started + args.timeout).items():
                line = f"{group[:60]:60} {name:24} {wall:8.1f} {cpu:8.1f}  {_summary(logs[name])}"
                print(line, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
