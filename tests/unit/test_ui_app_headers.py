"""The plugin's app answers every request, refused ones included, with a no-script CSP and nosniff, and
serves no OpenAPI document (the api-server test checks the same through a real ``airflow api-server``)."""

from __future__ import annotations

from starlette.testclient import TestClient

from airflow_k8s_ml.ui.app import SECURITY_HEADERS, create_app


def test_refused_and_missing_answers_carry_the_security_headers() -> None:
    client = TestClient(create_app())
    for path, status in (("/training", 401), ("/training/data.json", 401), ("/openapi.json", 404)):
        response = client.get(path)
        assert response.status_code == status
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["content-security-policy"] == SECURITY_HEADERS["Content-Security-Policy"]
    assert "script-src" not in SECURITY_HEADERS["Content-Security-Policy"]
