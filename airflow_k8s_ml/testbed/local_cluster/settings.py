"""Settings of the local cluster, passed in (never global) so tests shrink timings instead of sleeping.

Defaults are the real Kubernetes values; tests pass e.g. ``job_backoff_base=0.2``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class NodeCapacity:
    cpu: str = "8"
    memory: str = "32Gi"
    gpus: int = 0
    pods: int = 110


@dataclass
class QueueQuota:
    """The default Kueue queue ``local up --gpu-quota N`` creates (controllers/kueue/defaults.py)."""

    gpus: int = 0
    cpu: str = "8"
    memory: str = "32Gi"
    namespace: str = "default"


@dataclass
class ImageRule:
    """``pattern`` is an fnmatch glob on the image; ``allow=False`` makes pulls fail with ErrImagePull.

    ``missing``: a refused image is one the registry does not have (containerd's ``NotFound``: what a typo
    in a real cluster's image name answers), rather than one whose pull is denied. An image allow-list
    (``local up --allow-image``) ends with a ``*`` rule refused so."""

    pattern: str
    allow: bool = True
    command_prefix: tuple[str, ...] = ()
    # The image's numeric USER; None: the user the cluster runs as (see kubelet/identity.py).
    user: int | None = None
    missing: bool = False


@dataclass
class ClusterSettings:
    state_dir: Path = field(default_factory=lambda: Path(".state/local-cluster"))
    host: str = "127.0.0.1"
    port: int = 0
    tls: bool = True
    token: str | None = None
    capacity: NodeCapacity = field(default_factory=NodeCapacity)
    images: list[ImageRule] = field(default_factory=list)
    node_name: str = "local-node"
    # Watch history kept for resourceVersion resumes (changes, and bytes of encoded objects); older resumes
    # get 410 Expired. The history survives restarts (it is in the state dir's cluster.db).
    watch_history: int = 10_000
    watch_history_bytes: int = 64 * 1024 * 1024
    # Changes a watcher may fall behind before it is closed (its client resumes from its last
    # resourceVersion), so a client that stops reading cannot make the server buffer without bound.
    watch_buffer: int = 1000
    # Seconds such a closed watcher may take to finish writing its current event before its connection
    # is dropped (a client that stopped reading entirely).
    watch_stall_grace: float = 10.0
    # The 127.B.0.0/16 block pod IPs come from; None: the one recorded in the state dir (or a new one).
    pod_ip_block: int | None = None
    # Job controller: replacement-pod back-off base and cap (pkg/controller/job: 10s doubling, cap 6 min).
    job_backoff_base: float = 10.0
    job_backoff_cap: float = 360.0
    # Kubelet: container restart back-off (10s doubling, cap 300s) and default grace period.
    crashloop_backoff_base: float = 10.0
    crashloop_backoff_cap: float = 300.0
    default_grace_period: int = 30
    # How often controllers re-check time-based conditions (deadlines, TTLs, probes, schedules).
    resync_period: float = 0.5
    # Seconds between BOOKMARK events on watches that asked for them (allowWatchBookmarks=true).
    bookmark_interval: float = 60.0
    # Probe period multiplier: 1.0 = real periods; tests shrink.
    probe_time_scale: float = 1.0
    # Containment of a container's processes: "auto" (a cgroup v2 per instance where writable, else
    # process-tree tracking as a child subreaper), "cgroup" (auto, warning on fallback), "tree".
    containment: str = "auto"
    # metrics-server's --metric-resolution: seconds between the kubelet's cgroup samples; CPU is the rate
    # between the two newest (metrics.k8s.io's ``window``).
    metrics_resolution: float = 15.0
    # The custom metrics API's http_requests_per_second: requests over the last this many seconds (a
    # Prometheus adapter's ``rate(http_requests_total[30s])``).
    request_rate_window: float = 30.0
    # --horizontal-pod-autoscaler-sync-period.
    hpa_sync_period: float = 15.0
    # runAsNonRoot (when the cluster runs as root, images run as root unless their rule or runAsUser says
    # otherwise): "enforce" refuses as the kubelet does (CreateContainerConfigError); "warn" records the
    # same message as a Warning event and starts the container anyway (for interpreters only root reaches).
    run_as_non_root: str = "enforce"
    # Refuse pods with hostPath volumes at create (`local up --deny-host-path`): hostPath is host access.
    deny_host_path: bool = False
    # Kueue: the default ResourceFlavor/ClusterQueue/LocalQueue to create at start (None: none).
    queue_quota: QueueQuota | None = None
    # Kueue's API versions: True serves kueue.x-k8s.io and visibility.kueue.x-k8s.io v1beta2 (the storage
    # version since Kueue 0.16) and v1beta1 deprecated, with its warning; False plays a Kueue < 0.16: v1beta1
    # alone, undeprecated (objects are still kept as v1beta2 inside, which no client can see).
    kueue_v1beta2: bool = True
    # Clock for controllers (CronJob schedules, TTLs); tests inject a fake one.
    clock: Clock = field(default_factory=lambda: Clock())


class Clock:
    """Wall clock; replaced in tests by a clock that can be moved forward."""

    def now(self) -> float:
        return time.time()


class FakeClock(Clock):
    def __init__(self, start: float | None = None) -> None:
        self._offset = 0.0
        self._start = start

    def now(self) -> float:
        base = self._start if self._start is not None else time.time()
        return base + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += seconds
