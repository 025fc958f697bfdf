"""The durable copy of the store: every committed change appended to a SQLite log, as k3s's kine does.

The store keeps serving reads from memory; this log is what a restarted server (``local down``/``up``,
or a ``kill -9``) rebuilds it from: objects, their resourceVersions and the watch history, so a client
holding a pre-restart resourceVersion resumes its watch instead of relisting.

One row per change (``rv`` is the resourceVersion). Compaction, like etcd's, forgets every version at or
below the compaction point that a later version at or below it supersedes, and every deletion at or
below it; so the log always holds the state at the compaction point and every change after it.

Durability: WAL mode with ``synchronous=NORMAL``. Each change is its own transaction, written to the
WAL before :meth:`Journal.append` returns (so before the API answers). NORMAL does not fsync on commit,
only at checkpoints: a committed transaction survives the server process dying at any moment (``kill
-9``, OOM kill), because it is already in the operating system's page cache; only a power loss or a
kernel crash may lose the last transactions. FULL would fsync every commit, which costs milliseconds on
the event loop for every pod status update; the promise here is "an acknowledged write survives a crash
of the server", not of the machine. Checkpoints (the fsyncs) run on a background thread with its own
connection, so the event loop never waits on the disk's flush.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS log ("
    " rv INTEGER PRIMARY KEY, type TEXT NOT NULL, skey TEXT NOT NULL,"
    " namespace TEXT NOT NULL, name TEXT NOT NULL, value BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS log_key ON log (skey, namespace, name, rv)",
    "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
)
CHECKPOINT_EVERY = 2.0  # seconds between background WAL checkpoints


@dataclass(frozen=True)
class Row:
    rv: int
    type: str
    storage_key: tuple[str, str]
    namespace: str
    name: str
    value: bytes


def _skey(storage_key: tuple[str, str]) -> str:
    return f"{storage_key[0]}/{storage_key[1]}"


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


class Journal:
    """Append-only change log plus a small key/value table (the cluster's identity, the compaction
    point). Used from the cluster's event loop only; the checkpoint thread has its own connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.exists():  # 0600 from the start: the log holds Secrets (SQLite gives -wal/-shm the same)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        self._db = _connect(path)
        self._db.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints are the background thread's job
        for statement in SCHEMA:
            self._db.execute(statement)
        self._stop = threading.Event()
        # The thread holds no reference to the journal, and a journal dropped without close() (a cluster
        # never started, in unit tests) stops its thread when it is collected.
        self._checkpointer = threading.Thread(
            target=_checkpoint_loop, args=(path, self._stop), name="journal-checkpoint", daemon=True
        )
        self._checkpointer.start()
        weakref.finalize(self, self._stop.set)

    # -- the log ---------------------------------------------------------------------------------------
    def append(
        self, rv: int, type_: str, storage_key: tuple[str, str], namespace: str, name: str, value: bytes
    ) -> None:
        """Commit one change (its own transaction; on return it is in the WAL)."""
        self._db.execute(
            "INSERT INTO log (rv, type, skey, namespace, name, value) VALUES (?, ?, ?, ?, ?, ?)",
            (rv, type_, _skey(storage_key), namespace, name, value),
        )

    def rows(self) -> Iterator[Row]:
        """Every retained change in resourceVersion order."""
        for rv, type_, skey, namespace, name, value in self._db.execute(
            "SELECT rv, type, skey, namespace, name, value FROM log ORDER BY rv"
        ):
            group, _, plural = skey.rpartition("/")
            yield Row(rv, type_, (group, plural), namespace, name, bytes(value))

    def compact(self, upto: int) -> None:
        """Forget what no resume from a resourceVersion >= ``upto`` can need (etcd's compaction)."""
        with self._db:  # one transaction: the two deletes are seen together or not at all
            self._db.execute("BEGIN")
            self._db.execute(
                "DELETE FROM log WHERE rv <= ? AND EXISTS (SELECT 1 FROM log AS later WHERE"
                " later.skey = log.skey AND later.namespace = log.namespace AND later.name = log.name"
                " AND later.rv > log.rv AND later.rv <= ?)",
                (upto, upto),
            )
            self._db.execute("DELETE FROM log WHERE rv <= ? AND type = 'DELETED'", (upto,))
            self._db.execute("INSERT OR REPLACE INTO meta (k, v) VALUES ('compacted', ?)", (str(upto),))

    # -- identity and bookkeeping ----------------------------------------------------------------------
    def get(self, key: str) -> str | None:
        row = self._db.execute("SELECT v FROM meta WHERE k = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def put(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)", (key, value))

    def close(self) -> None:
        self._stop.set()
        self._checkpointer.join(10)
        try:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:  # pragma: no cover - a busy database at shutdown is harmless
            log.warning("journal: final checkpoint failed: %s", exc)
        self._db.close()


def _checkpoint_loop(path: Path, stop: threading.Event) -> None:
    """Checkpoint the WAL into the database every few seconds (PASSIVE: never blocks the writer)."""
    db = _connect(path)
    try:
        while not stop.wait(CHECKPOINT_EVERY):
            try:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as exc:  # pragma: no cover - retried at the next tick
                log.warning("journal: checkpoint failed: %s", exc)
    finally:
        db.close()
