"""The store rebuilt from its journal is the store that wrote it: objects, resourceVersions, watch
history (with each change's previous version) and the 410 floor, across compactions."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_k8s_ml.testbed.local_cluster import errors
from airflow_k8s_ml.testbed.local_cluster.journal import Journal
from airflow_k8s_ml.testbed.local_cluster.resources import lookup
from airflow_k8s_ml.testbed.local_cluster.store import Store

NAMESPACES = lookup("", "v1", "namespaces")
CONFIGMAPS = lookup("", "v1", "configmaps")


def _store(path: Path, **kwargs: int) -> Store:
    return Store(journal=Journal(path / "cluster.db"), **kwargs)


def _snapshot(store: Store) -> tuple:
    objects = sorted(
        (k, o["metadata"]["name"], o["metadata"]["resourceVersion"], o.get("data"))
        for k, o in store.all_objects()
    )
    return objects, store.resource_version, store.oldest_resource_version


def test_reopened_store_has_the_same_objects_history_and_floor(tmp_path: Path) -> None:
    store = _store(tmp_path, history=50)
    store.create(NAMESPACES, {"metadata": {"name": "ns"}})
    for i in range(1200):  # past a compaction (every 1000 changes) and the 50-change history
        name = f"cm-{i % 30}"
        if store.find(CONFIGMAPS, "ns", name) is None:
            store.create(CONFIGMAPS, {"metadata": {"name": name, "namespace": "ns"}, "data": {"i": str(i)}})
        elif i % 7 == 0:
            store.delete(CONFIGMAPS, "ns", name)
        else:
            store.mutate(CONFIGMAPS, "ns", name, lambda o, i=i: o.__setitem__("data", {"i": str(i)}))
    before = _snapshot(store)
    _, history = store.watch(CONFIGMAPS, None, store.oldest_resource_version)
    store.close()

    again = _store(tmp_path, history=50)
    assert _snapshot(again) == before
    _, replayed = again.watch(CONFIGMAPS, None, again.oldest_resource_version)
    assert [(c.rv, c.type, c.obj, c.old) for c in replayed] == [(c.rv, c.type, c.obj, c.old) for c in history]
    with pytest.raises(errors.StatusError) as expired:
        again.watch(CONFIGMAPS, None, again.oldest_resource_version - 1)
    assert expired.value.code == 410
    again.create(CONFIGMAPS, {"metadata": {"name": "new", "namespace": "ns"}})
    assert int(again.find(CONFIGMAPS, "ns", "new")["metadata"]["resourceVersion"]) == before[1] + 1
    again.close()


def test_a_refused_write_leaves_no_trace(tmp_path: Path) -> None:
    store = _store(tmp_path, max_object_bytes=1000)
    store.create(NAMESPACES, {"metadata": {"name": "ns"}})
    rv = store.resource_version
    with pytest.raises(errors.StatusError) as refused:
        store.create(CONFIGMAPS, {"metadata": {"name": "big", "namespace": "ns"}, "data": {"k": "x" * 2000}})
    assert (refused.value.code, refused.value.message) == (500, "etcdserver: request is too large")
    assert "reason" not in refused.value.status()
    assert store.resource_version == rv and store.find(CONFIGMAPS, "ns", "big") is None
    store.close()
    again = _store(tmp_path)
    assert again.resource_version == rv and again.find(CONFIGMAPS, "ns", "big") is None
    again.close()


def test_a_watcher_that_falls_behind_is_closed_and_holds_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, watch_buffer=3)
    store.create(NAMESPACES, {"metadata": {"name": "ns"}})
    w, _ = store.watch(CONFIGMAPS, None, None)
    closed = []
    w.on_overflow = lambda: closed.append(True)
    for i in range(4):
        store.create(CONFIGMAPS, {"metadata": {"name": f"c{i}", "namespace": "ns"}})
    assert closed == [True] and w.overflowed and not w.buffer and store.open_watches == 0
    store.close()
