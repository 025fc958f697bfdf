"""What durability costs per write: a store commit of a 4 KB object in memory only and through the SQLite
journal (WAL, synchronous=NORMAL). ``python bench/store_commit.py [--commits 5000]``; prints, asserts
nothing."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from airflow_k8s_ml.testbed.local_cluster.journal import Journal
from airflow_k8s_ml.testbed.local_cluster.resources import lookup
from airflow_k8s_ml.testbed.local_cluster.store import Store


def per_commit(store: Store, commits: int) -> float:
    namespaces, configmaps = lookup("", "v1", "namespaces"), lookup("", "v1", "configmaps")
    assert namespaces is not None and configmaps is not None
    store.create(namespaces, {"metadata": {"name": "ns"}})
    store.create(configmaps, {"metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "x" * 4000}})
    started = time.perf_counter()
    for i in range(commits):
        store.mutate(configmaps, "ns", "c", lambda o, i=i: o["data"].__setitem__("i", str(i)))
    return (time.perf_counter() - started) / commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=5000)
    args = parser.parse_args()
    memory = per_commit(Store(), args.commits)
    with tempfile.TemporaryDirectory() as tmp:
        durable = Store(journal=Journal(Path(tmp) / "cluster.db"))
        journaled = per_commit(durable, args.commits)
        durable.close()
    print(
        f"store commit of a 4 KB object: {memory * 1e6:.0f} us in memory, {journaled * 1e6:.0f} us with the "
        f"SQLite journal ({1 / journaled:.0f} commits/s)"
    )


if __name__ == "__main__":
    main()
