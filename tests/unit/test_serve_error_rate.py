"""The reference server's bad-model switch: ``ERROR_RATE`` answers that share of /predict with 500, spread
evenly, while probes stay healthy (what a canary analysis must catch). Real HTTP on loopback; the loaded
model is a stand-in (no torch), since the switch acts before a prediction is made."""

from __future__ import annotations

import itertools
import json
import threading
import urllib.error
import urllib.request
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.workloads import serve

CKPT = "s3://m/prod/step-3/"


def test_the_rate_comes_from_env_or_flag_and_is_checked() -> None:
    assert serve.parse_config([], {"MODEL_URI": CKPT}).error_rate == 0.0
    assert serve.parse_config([], {"MODEL_URI": CKPT, "ERROR_RATE": "0.25"}).error_rate == 0.25
    assert serve.parse_config(["--error-rate", "1"], {"MODEL_URI": CKPT}).error_rate == 1.0
    with pytest.raises(ValidationError) as info:
        serve.parse_config([], {"MODEL_URI": CKPT, "ERROR_RATE": "1.5"})
    assert info.value.field == "error_rate"


@pytest.mark.parametrize(
    ("rate", "requests", "failures"), [(0.0, 40, 0), (0.1, 40, 4), (0.25, 40, 10), (1.0, 7, 7)]
)
def test_failures_are_the_share_spread_evenly(rate: float, requests: int, failures: int) -> None:
    failed = [n for n in range(1, requests + 1) if serve.injected_failure(n, rate)]
    assert len(failed) == failures
    if failures > 1:  # evenly: the gaps differ by at most one request
        gaps = {b - a for a, b in itertools.pairwise(failed)}
        assert max(gaps) - min(gaps) <= 1


def post(port: int, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_bad_model_answers_500_to_its_share_and_stays_ready() -> None:
    holder = serve.ModelHolder(CKPT, error_rate=0.5)
    holder.loaded = SimpleNamespace(model=None, step=3, metrics={})
    holder.ready.set()
    holder.predict = lambda rows: {"predictions": [0] * len(rows), "model_uri": CKPT, "step": 3}  # type: ignore[method-assign]
    server = serve.ModelServer(("127.0.0.1", 0), holder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_port
        answers = [post(port, "/predict", {"instances": [[0.0] * 64]}) for _ in range(10)]
        assert [status for status, _ in answers].count(500) == 5
        assert [status for status, _ in answers].count(200) == 5
        failed = next(body for status, body in answers if status == 500)
        assert failed == {"error": "injected failure (error_rate=0.5)", "model_uri": CKPT}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as ready:
            assert ready.status == 200
    finally:
        server.shutdown()
        server.server_close()


def test_a_draining_server_answers_on_but_is_no_longer_ready() -> None:
    """After SIGTERM the server keeps answering for ``drain_seconds`` while its readiness says 503, so the
    Service's endpoints drop it before it closes (a deleted canary or an old pod loses no request)."""
    assert serve.parse_config([], {"MODEL_URI": CKPT}).drain_seconds == 2.0
    assert serve.parse_config([], {"MODEL_URI": CKPT, "DRAIN_SECONDS": "0"}).drain_seconds == 0.0
    with pytest.raises(ValidationError) as info:
        serve.parse_config(["--drain-seconds", "-1"], {"MODEL_URI": CKPT})
    assert info.value.field == "drain_seconds"
    holder = serve.ModelHolder(CKPT)
    holder.loaded = SimpleNamespace(model=None, step=3, metrics={})
    holder.ready.set()
    holder.predict = lambda rows: {"predictions": [0] * len(rows), "model_uri": CKPT, "step": 3}  # type: ignore[method-assign]
    server = serve.ModelServer(("127.0.0.1", 0), holder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_port
        holder.draining.set()
        with pytest.raises(urllib.error.HTTPError) as unready:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10)
        assert unready.value.code == 503 and json.loads(unready.value.read())["status"] == "draining"
        assert post(port, "/predict", {"instances": [[0.0] * 64]})[0] == 200
    finally:
        server.shutdown()
        server.server_close()
