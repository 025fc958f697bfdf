"""Hostile pod output under a real triggerer: a 10 MB line and a 100,000-line flood. No line may vanish
without a line in the task log saying so, and the triggerer must not report its loop blocked by the relay.

Figures are printed (run with ``-s``): how many flood lines were relayed and how many counted as not
relayed, and the triggerer's "blocked" warnings during the run.
"""

from __future__ import annotations

import re

from tests.production.conftest import Production
from tests.production.dags.hostile_logs import FLOOD_LINES

DAG_ID = "hostile_logs"
BLOCKED = re.compile(r"blocked for ([\d.]+) ?s", re.IGNORECASE)


def _blocked(production: Production) -> list[float]:
    log = production.stack.component_log("triggerer")
    return [
        float(m.group(1))
        for line in log.splitlines()
        if "block" in line.lower()
        for m in [BLOCKED.search(line)]
        if m
    ]


def test_long_lines_and_a_flood_reach_the_task_log_or_are_counted(production: Production) -> None:
    blocked_before = len(_blocked(production))
    run_id = production.rest.trigger(DAG_ID)
    run = production.rest.wait_run(DAG_ID, run_id, timeout=900)
    assert run["state"] == "success", run

    long_lines = production.log_lines(DAG_ID, run_id, "long_lines", 1)
    relayed = [m.group(1) for line in long_lines if (m := re.match(r"^\[[^\]]+\] (.*)$", line, re.S))]
    texts = [t for t in relayed if t.startswith(("before", "x", "y", "after ", "final"))]
    assert "before" in texts, [line[:120] for line in long_lines[-60:]]
    assert any(t.startswith("y" * 500 + " [... ") and t.endswith(" bytes cut]") for t in texts), texts[:3]
    assert any(t.startswith("x" * 500 + " [... ") and t.endswith(" bytes cut]") for t in texts)
    assert [t for t in texts if t.startswith("after ")] == [f"after {i}" for i in range(1, 40)]
    assert "final" in texts
    assert max(len(line) for line in long_lines) < 2_000

    flood = production.log_lines(DAG_ID, run_id, "flood", 1)
    numbers = [int(m.group(1)) for line in flood if (m := re.search(r"\] flood (\d+)$", line))]
    assert numbers == sorted(set(numbers)), "relayed out of order or twice"
    counted = [line for line in flood if "lines not relayed" in line]
    counts = [re.search(r"\] ([\d,]+) lines not relayed", line) for line in counted]
    assert all(counts) and all("kubectl logs -n ml " in line for line in counted), counted[:3]
    dropped = sum(int(found.group(1).replace(",", "")) for found in counts if found)
    blocked = _blocked(production)[blocked_before:]
    print(
        f"flood: {len(numbers):,} relayed, {dropped:,} counted as not relayed in {len(counted)} lines; "
        f"triggerer blocked warnings: {len(blocked)} (worst {max(blocked, default=0):.2f} s)"
    )
    assert len(numbers) + dropped == FLOOD_LINES or any("nor any later line" in line for line in counted)
    assert any("over the log relay's pace" in line for line in counted), counted[:3]
