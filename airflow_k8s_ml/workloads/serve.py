"""Serve the digits model over HTTP: ``python -m airflow_k8s_ml.workloads.serve --model-uri URI``.

The serving workload behind the demo's Deployment. Liveness and readiness are separate on purpose: the
socket is bound and ``/healthz`` answers at once, while the model (torch import + checkpoint download) loads
in a background thread and ``/readyz`` stays 503 until it is in memory, so a rollout only sends traffic to
pods that can answer. A model that cannot be loaded ends the process with exit 1 (the pod restarts and the
rollout shows it) instead of leaving a live-but-never-ready pod. SIGTERM (pod deletion) shuts down cleanly
with exit 0.

Endpoints: ``GET /healthz``, ``GET /readyz``, ``POST /predict`` with ``{"instances": [[64 numbers], ...]}``.

``--error-rate`` (env ``ERROR_RATE``, 0..1, default 0) makes a *bad model* for rollout tests: that share of
``/predict`` requests is answered 500, spread evenly and deterministically (request n fails when
``floor(n * rate)`` grows), so a canary analysis over N requests sees ``N * rate`` errors, not a random
number of them. Probes and readiness stay healthy: a bad model that passes its probes is exactly what a
canary analysis is for.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.workloads.cli import EXIT_ERROR, env_or, exit_with, log, log_error, require
from airflow_k8s_ml.workloads.instances import validate_instances

MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_INSTANCES = 4096


@dataclass(frozen=True)
class ServeConfig:
    """Where to listen and which checkpoint to serve."""

    model_uri: str
    host: str = "127.0.0.1"
    port: int = 8080
    error_rate: float = 0.0
    drain_seconds: float = 2.0


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The CLI; ``--host`` defaults to ``POD_IP`` (the local cluster gives each pod its own address)."""
    p = argparse.ArgumentParser(
        prog="python -m airflow_k8s_ml.workloads.serve", description=(__doc__ or "").split("\n")[0]
    )
    model = env_or(env, "MODEL_URI", None)
    p.add_argument(
        "--model-uri",
        default=model,
        required=model is None,
        help="checkpoint folder URI to serve (env MODEL_URI)",
    )
    p.add_argument(
        "--host",
        default=env_or(env, "POD_IP", "127.0.0.1"),
        help="bind address (env POD_IP; default 127.0.0.1)",
    )
    p.add_argument(
        "--port", type=int, default=env_or(env, "PORT", 8080), help="bind port (env PORT; 0 = any)"
    )
    p.add_argument(
        "--error-rate",
        type=float,
        default=env_or(env, "ERROR_RATE", 0.0),
        help="share of /predict requests answered 500, 0..1 (env ERROR_RATE; default 0): a bad model",
    )
    p.add_argument(
        "--drain-seconds",
        type=float,
        default=env_or(env, "DRAIN_SECONDS", 2.0),
        help="after SIGTERM, keep answering this long (readiness 503) before closing, so the Service stops "
        "sending requests first (env DRAIN_SECONDS; default 2)",
    )
    return p


def parse_config(argv: Sequence[str] | None, env: Mapping[str, str]) -> ServeConfig:
    """Merge CLI and env into a checked :class:`ServeConfig`."""
    a = build_parser(env).parse_args(argv)
    require(a.port, "port", 0 <= a.port < 65536, "must be in 0..65535")
    require(
        a.model_uri, "model_uri", a.model_uri.startswith(("s3://", "file://")), "must be s3:// or file://"
    )
    require(a.error_rate, "error_rate", 0.0 <= a.error_rate <= 1.0, "must be in 0..1")
    require(a.drain_seconds, "drain_seconds", 0.0 <= a.drain_seconds <= 60.0, "must be in 0..60")
    return ServeConfig(a.model_uri, a.host, a.port, a.error_rate, a.drain_seconds)


def injected_failure(n: int, rate: float) -> bool:
    """Whether request ``n`` (1, 2, ...) is one of the ``rate`` share answered 500: evenly spread, so any
    ``k`` consecutive requests hold ``k * rate`` failures, give or take one."""
    return int(n * rate) > int((n - 1) * rate)


class ModelHolder:
    """The loaded model, set once by the loader thread; request threads only read it."""

    def __init__(self, model_uri: str, error_rate: float = 0.0) -> None:
        self.model_uri = model_uri
        self.loaded: Any = None  # a LoadedCheckpoint once ready
        self.ready = threading.Event()
        self.draining = threading.Event()  # SIGTERM received: still answering, no longer ready
        self.error_rate = error_rate
        self._requests = 0
        self._lock = threading.Lock()

    def fails_next(self) -> bool:
        """Count a prediction request; True when ``error_rate`` says it fails."""
        if self.error_rate <= 0:
            return False
        with self._lock:
            self._requests += 1
            return injected_failure(self._requests, self.error_rate)

    def predict(self, rows: list[tuple[float, ...]]) -> dict[str, Any]:
        """Predictions plus the provenance a caller needs to know which model answered."""
        from airflow_k8s_ml.workloads.model import predict

        return {
            "predictions": predict(self.loaded.model, rows),
            "model_uri": self.model_uri,
            "step": self.loaded.step,
        }


Response = tuple[int, dict[str, Any]]


class Handler(BaseHTTPRequestHandler):
    """Routes by (method, path) through a table; every answer is a JSON object."""

    server: ModelServer
    GET_ROUTES: dict[str, Callable[[Handler], Response]] = {}
    POST_ROUTES: dict[str, Callable[[Handler], Response]] = {}

    def do_GET(self) -> None:
        self._dispatch(self.GET_ROUTES)

    def do_POST(self) -> None:
        self._dispatch(self.POST_ROUTES)

    def _dispatch(self, routes: Mapping[str, Callable[[Handler], Response]]) -> None:
        route = routes.get(self.path.split("?", 1)[0])
        if route is None:
            status, body = 404, {"error": f"no route {self.command} {self.path}"}
        else:
            try:
                status, body = route(self)
            except ValidationError as exc:
                status, body = 400, {"error": str(exc), "field": exc.field}
            except Exception as exc:  # a bug must not kill the server thread silently
                log_error(f"error: {self.command} {self.path}: {type(exc).__name__}: {exc}")
                status, body = 500, {"error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_json(self) -> Any:
        """The request body as JSON; size and syntax problems are 400s via ValidationError."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError as exc:
            raise ValidationError("body", "bad Content-Length") from exc
        if length <= 0:
            raise ValidationError("body", "empty body; send JSON with a Content-Length")
        if length > MAX_BODY_BYTES:
            raise ValidationError("body", f"larger than {MAX_BODY_BYTES} bytes")
        try:
            return json.loads(self.rfile.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValidationError("body", f"invalid JSON: {exc}") from exc

    def log_message(self, format: str, *args: Any) -> None:
        """Access log to stdout, without the probe noise of kubelet's /healthz and /readyz calls."""
        if not self.path.startswith(("/healthz", "/readyz")):
            log(f"http {self.address_string()} {format % args}")


def healthz(handler: Handler) -> Response:
    """Liveness: the process is up and serving HTTP."""
    return 200, {"status": "ok"}


def readyz(handler: Handler) -> Response:
    """Readiness: 200 only once the model is in memory."""
    holder = handler.server.holder
    if not holder.ready.is_set():
        return 503, {"status": "loading", "model_uri": holder.model_uri}
    if holder.draining.is_set():
        return 503, {"status": "draining", "model_uri": holder.model_uri}
    return 200, {"status": "ready", "model_uri": holder.model_uri, "step": holder.loaded.step}


def predict_route(handler: Handler) -> Response:
    """``POST /predict``: validate, then classify every instance."""
    holder = handler.server.holder
    if not holder.ready.is_set():
        return 503, {"error": "model not loaded yet", "model_uri": holder.model_uri}
    rows = validate_instances(handler.read_json(), MAX_INSTANCES)
    if holder.fails_next():
        return 500, {
            "error": f"injected failure (error_rate={holder.error_rate})",
            "model_uri": holder.model_uri,
        }
    return 200, holder.predict(rows)


Handler.GET_ROUTES = {"/healthz": healthz, "/readyz": readyz}
Handler.POST_ROUTES = {"/predict": predict_route}


class ModelServer(ThreadingHTTPServer):
    """A threading HTTP server that carries the :class:`ModelHolder` for its handlers."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], holder: ModelHolder) -> None:
        super().__init__(address, Handler)
        self.holder = holder


def _load_in_background(holder: ModelHolder, stop: threading.Event, failure: list[str]) -> None:
    """Import torch and load the checkpoint; on failure record why and stop the server."""
    started = time.monotonic()
    try:
        from airflow_k8s_ml.workloads.checkpoint_io import load_checkpoint

        holder.loaded = load_checkpoint(holder.model_uri)
    except Exception as exc:
        failure.append(f"cannot load model {holder.model_uri}: {type(exc).__name__}: {exc}")
        stop.set()
        return
    holder.ready.set()
    metrics = holder.loaded.metrics
    acc = f" val_accuracy={metrics['val_accuracy']:.4f}" if "val_accuracy" in metrics else ""
    seconds = time.monotonic() - started
    log(f"ready model_uri={holder.model_uri} step={holder.loaded.step}{acc} seconds={seconds:.2f}")


def _wait_for_stop(stop: threading.Event) -> bool:
    """Block until SIGTERM/SIGINT or a loader failure.

    The signal handler only records the signal: calling ``Event.set`` from a handler can deadlock if the
    signal lands while the main thread holds the event's internal lock, so the main thread polls instead.
    """
    received: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: received.append(signum))
    while not received and not stop.wait(0.1):
        pass
    if received:
        log(f"signal {signal.Signals(received[0]).name}: shutting down")
    return bool(received)


def main(argv: Sequence[str] | None = None) -> int:
    """Bind, answer probes at once, load the model, serve until SIGTERM/SIGINT."""
    cfg = parse_config(argv, os.environ)
    holder = ModelHolder(cfg.model_uri, cfg.error_rate)
    server = ModelServer((cfg.host, cfg.port), holder)
    stop = threading.Event()
    failure: list[str] = []
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    log(f"serve listening on http://{cfg.host}:{server.server_port} model_uri={cfg.model_uri}")
    threading.Thread(
        target=_load_in_background, args=(holder, stop, failure), name="loader", daemon=True
    ).start()
    if _wait_for_stop(stop) and cfg.drain_seconds > 0:
        # A pod being deleted gets SIGTERM while the Service may still route to it for a moment (the
        # endpoints follow the deletion, they do not precede it): answer on, unready, then close.
        holder.draining.set()
        log(f"draining for {cfg.drain_seconds:g}s")
        time.sleep(cfg.drain_seconds)
    server.shutdown()
    server.server_close()
    if failure:
        log_error(f"error: {failure[0]}")
        return EXIT_ERROR
    log("serve stopped")
    return 0


if __name__ == "__main__":
    exit_with(main)
