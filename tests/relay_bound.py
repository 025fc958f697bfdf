"""What a ``kill -9`` of a trigger may do to the relayed task log where the cursor alone decides the resume
point (the task log's trigger files cannot be read back: docs/waiting.md "Exactly once across a kill").

Where those files can be read (one machine, a shared log folder) the successor resumes after the last line
the log really holds and every line is there exactly once: the production tier's triggerer kill and the
ledger variant of the integration kill test assert that. This module is the weaker promise of the fallback,
in one place for every crash test that exercises it.

The promise: the successor trigger repeats at most the lines the killed one relayed after the start of its
last completed cursor write - within ``MIN_INTERVAL`` plus a write's round trip (two when one was on the wire)
before the kill, a contiguous tail of what it relayed - and loses none. Under a real triggerer a line its
runner had handed to the supervisor that writes the log file, but the supervisor never wrote, is lost (seen:
150 lines at load ~30, the supervisor ~3 s behind): that is why the real triggerer uses the ledger.
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
