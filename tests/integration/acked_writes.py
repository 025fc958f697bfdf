"""Writers that keep a ledger of what the API server acknowledged, for crash tests of its durability.

Each writer is a thread with its own ``kubernetes`` client, writing ConfigMaps of its own in a cycle
(create one, patch it, then delete it or patch it again) until a request fails -
the server was killed under it. A write is acknowledged when its 2xx answer arrived; the one a writer had in
flight when the server died may or may not have been carried out, and the ledger says what it would have
left. :meth:`Ledger.mismatches` then compares the ConfigMaps a restarted server lists with the ledger.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

State = tuple[dict[str, str], int] | None  # (data, resourceVersion), or None: deleted / never created


@dataclass
class Ledger:
    prefix: str
    acked: dict[str, State] = field(default_factory=dict)
    in_flight: dict[str, State] = field(default_factory=dict)  # what an unanswered write would leave
    rvs: list[list[int]] = field(
        default_factory=list
    )  # per writer, the acknowledged resourceVersions in order
    refused: list[str] = field(default_factory=list)  # answers other than 2xx: none are expected
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def count(self) -> int:
        return sum(len(r) for r in self.rvs)

    def mismatches(self, listed: dict[str, State]) -> list[str]:
        """What the restarted server lost or invented: every acknowledged write is there as answered
        (same data, same resourceVersion); an unanswered one left either the state before it or its own."""
        wrong = []
        for name in sorted(set(self.acked) | set(self.in_flight)):
            before, found = self.acked.get(name), listed.get(name)
            if found == before:
                continue
            if name in self.in_flight and _as_sent(found, self.in_flight[name], before):
                continue
            wrong.append(
                f"{name}: acknowledged {before}, in flight {self.in_flight.get(name, '-')}, found {found}"
            )
        strays = sorted(set(listed) - set(self.acked) - set(self.in_flight))
        return wrong + [f"{name}: never written, found {listed[name]}" for name in strays]


def _as_sent(found: State, sent: State, before: State) -> bool:
    """``found`` is what the unanswered write would have left: deleted, or its data at a newer version."""
    if sent is None or found is None:
        return found is sent
    return found[0] == sent[0] and (before is None or found[1] > before[1])


def write_until_refused(core: client.CoreV1Api, ledger: Ledger, writer: int) -> None:
    """One writer's cycle, until the first request that gets no answer."""
    with ledger.lock:
        ledger.rvs.append([])
        mine = ledger.rvs[-1]
    step = 0
    while True:
        name, sent, write = _step(core, f"{ledger.prefix}-{writer}", step)
        with ledger.lock:
            ledger.in_flight[name] = None if sent is None else (sent, 0)
        try:
            answer = write()
        except ApiException as exc:  # an answer, not a crash: the cycle never asks for an error
            with ledger.lock:
                del ledger.in_flight[name]
                ledger.refused.append(f"{name}: {exc.status} {exc.reason}")
            return
        except Exception:  # refused or reset: the server is gone, and this write is in doubt
            return
        with ledger.lock:
            del ledger.in_flight[name]
            if sent is None:  # a delete answers a Status, with no resourceVersion of the object
                ledger.acked[name] = None
            else:
                ledger.acked[name] = (dict(answer.data), int(answer.metadata.resource_version))
                mine.append(int(answer.metadata.resource_version))
        step += 1


def _step(
    core: client.CoreV1Api, stem: str, step: int
) -> tuple[str, dict[str, str] | None, Callable[[], Any]]:
    """Steps 3k, 3k+1, 3k+2 create ``stem-k``, patch it, then delete it (odd k) or patch it again
    (even k)."""
    k, phase = divmod(step, 3)
    name = f"{stem}-{k}"
    if phase == 0:
        data = {"v": str(step)}
        body = {"metadata": {"name": name}, "data": data}
        return name, data, lambda: core.create_namespaced_config_map("default", body)
    if phase == 2 and k % 2:
        return name, None, lambda: core.delete_namespaced_config_map(name, "default")
    data = {"v": f"patched-{step}"}
    return name, data, lambda: core.patch_namespaced_config_map(name, "default", {"data": data})
