"""What a ``kill -9`` of a trigger may do to the relayed task log, as docs/waiting.md promises it today.

One place for the bound, so every crash test (integration: a trigger process killed; production: the
triggerer's whole process tree killed) asserts the same promise, and the day the window closes (exactly once
across a crash) only this module tightens: ``REPEAT_WINDOW = 0`` and no loss.

The promise: the successor trigger repeats at most the lines the killed one relayed after the start of its
last completed cursor write - within ``MIN_INTERVAL`` plus a write's round trip (two when one was on the wire)
before the kill, a contiguous tail of what it relayed - and loses none. Under a real triggerer a line its
runner had handed to the supervisor that writes the log file, but the supervisor never wrote, is lost: that
needs the kill to land within milliseconds of the line, so such a loss is bounded by the same window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from airflow_k8s_ml.triggers.log_cursor import MIN_INTERVAL

#: ``MIN_INTERVAL`` plus the round trips, given a generous second under load.
REPEAT_WINDOW = MIN_INTERVAL + 1.0

Relayed = Sequence[tuple[float, int]]  # (when the line reached the log, its number), in order


def beyond_the_bound(
    killed: float,
    before: Relayed,
    after: Relayed,
    expected: Iterable[int],
    printed: Mapping[int, float] | None = None,
) -> list[str]:
    """What the kill at ``killed`` did beyond the bound; empty when it kept it.

    ``before``/``after``: the lines the killed trigger and its successor relayed (times on ``killed``'s
    clock). ``printed``: when the workload printed each line, where a loss in the supervisor is possible
    (a real triggerer); None where the test reads the relaying process's own output (no loss possible)."""
    problems = []
    last_before = max((n for _, n in before), default=-1)
    repeated = [n for _, n in after if n <= last_before]
    if repeated != list(range(last_before - len(repeated) + 1, last_before + 1)):
        problems.append(f"the repeats are not a contiguous tail up to line {last_before}: {repeated}")
    window = {n for at, n in before if at >= killed - REPEAT_WINDOW}
    if not set(repeated) <= window:
        problems.append(
            f"{len(repeated)} lines repeated (from line {repeated[0]}); the {REPEAT_WINDOW} s before the "
            f"kill held {len(window)}"
        )
    lost = sorted(set(expected) - {n for _, n in before} - {n for _, n in after})
    late = [n for n in lost if printed is None or printed.get(n, killed) < killed - REPEAT_WINDOW]
    if late:
        problems.append(f"{len(late)} lines lost: {late[:10]}{' ...' if len(late) > 10 else ''}")
    return problems
