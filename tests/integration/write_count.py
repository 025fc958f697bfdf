"""Counting the writes a call sent, from the local cluster's ``/metrics``.

"Nothing was created" is proven by counting, not by listing afterwards: a create-then-delete leaves an
empty namespace too. ``apiserver_request_total`` counts every request the API server answered by verb,
resource and code (the cluster's own controllers do not go through HTTP); a server-side dry run is labelled
``dry_run="All"`` and is not a write.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterator

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SERIES = re.compile(
    r'^apiserver_request_total\{verb="(\w+)",resource="([^"]*)",code="(\d+)"(,dry_run="All")?\} (\d+)$'
)


def requests(conn_id: str = "kubernetes_default") -> Counter[tuple[str, str, str]]:
    """Every request the API server has answered but its own ``/metrics`` reads (resource ""), dry runs
    left out: (verb, resource, code) -> count."""
    from airflow_k8s_ml.kube.sync_client import KubeClient

    client = KubeClient(conn_id)
    try:
        text = client.get_raw("/metrics").decode()
    finally:
        client.close()
    counts: Counter[tuple[str, str, str]] = Counter()
    for line in text.splitlines():
        match = _SERIES.match(line)
        if match and match.group(2) and not match.group(4):
            counts[(match.group(1), match.group(2), match.group(3))] += int(match.group(5))
    return counts


def writes(conn_id: str = "kubernetes_default") -> Counter[tuple[str, str, str]]:
    """Write requests the API server has answered, dry runs left out: (verb, resource, code) -> count."""
    return Counter({key: n for key, n in requests(conn_id).items() if key[0] in WRITE_VERBS})


def accepted(counts: Counter[tuple[str, str, str]]) -> Counter[tuple[str, str, str]]:
    """The writes the API server carried out (2xx)."""
    return Counter({key: n for key, n in counts.items() if key[2].startswith("2") and n})


@contextlib.contextmanager
def no_write_accepted(conn_id: str = "kubernetes_default") -> Iterator[Counter[tuple[str, str, str]]]:
    """Asserts that no write request was carried out inside the block; yields the requests it sent
    (filled in on exit: refused writes, e.g. a 400 for an unknown field, are there)."""
    before = writes(conn_id)
    sent: Counter[tuple[str, str, str]] = Counter()
    yield sent
    sent.update(writes(conn_id) - before)
    assert not accepted(sent), f"writes were carried out while nothing was to be created: {dict(sent)}"
