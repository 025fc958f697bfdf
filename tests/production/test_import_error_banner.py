"""Our parse-time error read whole where the Airflow UI shows it: a DAG with a bad quantity in the tier's
DAG folder, the dashboard's "Dag Import Error" banner opened in headless Chromium, and the error's text
found there exactly as the operator raised it (``requests["memory"]`` and the quantity pattern, square
brackets included; ``tests/integration/test_import_errors_cli.py`` does the same for the CLI). The REST
answer the banner is drawn from (``/api/v2/importErrors``) is checked too.

The DAG file is written into the running tier's folder and removed at the end (the dag-processor then
drops the error), so the other production tests see the folder as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from tests.production.browser import CHROMIUM, DRIVER, log_in
from tests.production.conftest import Production, wait_until

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no Chromium/ChromeDriver here (apt-get install chromium chromium-driver)",
)

FILE = "bad_quantity_banner.py"
BAD_QUANTITY = """
from airflow.sdk import DAG
from airflow_k8s_ml.operators import FineTuneJobOperator

with DAG("bad_quantity_banner", schedule=None):
    FineTuneJobOperator(task_id="train", image="python:3.11", requests={"memory": "2 GB"})
"""


def _flat(text: str) -> str:
    """The text without layout (wrapping, indentation): the banner may wrap a long line."""
    return "".join(ch for ch in text if not ch.isspace())


def _message() -> str:
    from airflow_k8s_ml.operators import FineTuneJobOperator

    with pytest.raises(ValidationError) as raised:
        FineTuneJobOperator(task_id="train", image="python:3.11", requests={"memory": "2 GB"})
    message = str(raised.value)
    assert '["memory"]' in message and "[EinumkKMGTPe]" in message, message
    return message


def _errors(production: Production) -> list[dict[str, Any]]:
    answer = production.rest.request("GET", "/api/v2/importErrors", params={"limit": 100})
    return [e for e in answer["import_errors"] if str(e.get("filename", "")).endswith(FILE)]


@pytest.fixture()
def bad_dag(production: Production) -> Iterator[Path]:
    path = Path(production.stack.settings.dags_folder) / FILE
    path.write_text(BAD_QUANTITY)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
        wait_until("the import error dropped once the file is gone", lambda: not _errors(production), 180)


def test_the_import_error_banner_shows_a_bad_quantitys_whole_message(
    production: Production,
    browser: Any,
    bad_dag: Path,
) -> None:
    from selenium.webdriver.common.by import By

    message = _message()
    [error] = wait_until("the dag-processor's import error", lambda: _errors(production), timeout=180)
    assert message in error["stack_trace"], error["stack_trace"][-3000:]  # the API answer, byte for byte

    base = production.stack.url
    log_in(browser, production.stack.url, production.stack.password)
    browser.get(f"{base}/")

    def banner() -> list[Any]:
        return [
            b
            for b in browser.find_elements(By.TAG_NAME, "button")
            if b.is_displayed() and "Dag Import Error" in b.text
        ]

    wait_until("the dashboard's import-error banner", banner, timeout=60)[0].click()
    dialog = wait_until(
        "the import-error dialog",
        lambda: [d for d in browser.find_elements(By.CSS_SELECTOR, "[role=dialog]") if d.is_displayed()],
        timeout=30,
    )[0]
    entry = wait_until(
        f"{FILE} in the dialog",
        lambda: [
            e for e in dialog.find_elements(By.XPATH, f".//*[contains(text(), '{FILE}')]") if e.is_displayed()
        ],
        timeout=30,
    )
    entry[0].click()  # the file's entry opens its stack trace

    def shown() -> str | None:
        text = str(browser.execute_script("return arguments[0].innerText", dialog))
        return text if "ValidationError" in text else None

    text = wait_until("the stack trace in the dialog", shown, timeout=30)
    assert _flat(message) in _flat(text), f"{message!r} not shown whole in the banner:\n{text[-3000:]}"
