"""Prometheus text metrics, named as the real apiserver names them where one exists.

Benchmarks read ``apiserver_request_total`` (requests per waiting job-hour) and
``apiserver_tcp_connections_total`` (new connections per request) from here; tests count the writes a call
sent (a refused input must send none). A server-side dry run (``dryRun=All``) is counted under the label
``dry_run="All"``, as upstream labels it, so a dry run is not mistaken for a write (the label is left out
of the other series).

``local_cluster_controller_resyncs_total`` (ours; kube-controller-manager has no such series) counts each
controller's periodic resync passes, ``started`` and ``completed`` (every key the pass enqueued has been
reconciled): a test asserting that a controller did nothing at a moment waits for a pass that started after
that moment to complete, instead of sleeping and hoping the controller was not merely slow.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable


class Metrics:
    def __init__(self, open_watches: Callable[[], int]) -> None:
        self.requests: Counter[tuple[str, str, str, bool]] = Counter()
        self.connections = 0
        self._open_watches = open_watches
        self.longrunning: Counter[str] = Counter()
        self.resyncs: Counter[tuple[str, str]] = Counter()  # (controller, "started" | "completed")

    def count_request(self, verb: str, resource: str, code: int, *, dry_run: bool = False) -> None:
        self.requests[(verb, resource, str(code), dry_run)] += 1

    def render(self) -> str:
        lines = [
            "# HELP apiserver_request_total Counter of apiserver requests by verb, resource and code.",
            "# TYPE apiserver_request_total counter",
        ]
        for (verb, resource, code, dry_run), n in sorted(self.requests.items()):
            dry = ',dry_run="All"' if dry_run else ""
            series = f'verb="{verb}",resource="{resource}",code="{code}"{dry}'
            lines.append(f"apiserver_request_total{{{series}}} {n}")
        lines += [
            "# HELP apiserver_longrunning_requests Gauge of all active long-running apiserver requests.",
            "# TYPE apiserver_longrunning_requests gauge",
        ]
        for resource, n in sorted(self.longrunning.items()):
            lines.append(f'apiserver_longrunning_requests{{verb="WATCH",resource="{resource}"}} {n}')
        lines += [
            "# HELP local_cluster_controller_resyncs_total Periodic resync passes by controller and state.",
            "# TYPE local_cluster_controller_resyncs_total counter",
        ]
        for (controller, state), n in sorted(self.resyncs.items()):
            lines.append(
                f'local_cluster_controller_resyncs_total{{controller="{controller}",state="{state}"}} {n}'
            )
        lines += [
            "# HELP apiserver_registered_watchers Number of currently open watches.",
            "# TYPE apiserver_registered_watchers gauge",
            f"apiserver_registered_watchers {self._open_watches()}",
            "# HELP apiserver_tcp_connections_total Client TCP connections accepted.",
            "# TYPE apiserver_tcp_connections_total counter",
            f"apiserver_tcp_connections_total {self.connections}",
        ]
        return "\n".join(lines) + "\n"
