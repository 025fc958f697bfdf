"""The Training tab in a real browser: headless Chromium logs in to the real API server and opens a
training task's page, the way a user looks at a nightly run.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) and the ``selenium``
bindings (the ``dev`` extra); skipped with the reason where they are missing. ``UPDATE_SCREENSHOT=1``
writes the page to ``docs/training-tab.png``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.production.browser import CHROMIUM, DRIVER, log_in
from tests.production.conftest import Production, wait_until

DAG = "nightly_finetune"
DOCS = Path(__file__).resolve().parents[2] / "docs"

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no Chromium/ChromeDriver here (apt-get install chromium chromium-driver)",
)


def _finished_training_run(production: Production) -> str:
    done = [
        r
        for r in production.rest.runs(DAG)
        if r["state"] == "success" and (r.get("conf") or {}).get("mode", "job") == "job"
    ]
    if done:
        return str(done[-1]["dag_run_id"])
    run_id = production.rest.trigger(DAG, {"epochs": 3, "max_train_samples": 600, "accuracy_threshold": 0.5})
    assert production.rest.wait_run(DAG, run_id, timeout=600)["state"] == "success"
    return run_id


def test_training_tab_shows_the_curve_of_a_finished_run(production: Production, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    run_id = _finished_training_run(production)
    base = production.stack.url
    log_in(browser, production.stack.url, production.stack.password)

    browser.get(f"{base}/dags/{DAG}/runs/{run_id}/tasks/fine_tune_job/plugin/airflow-k8s-ml-training")
    frames = wait_until(
        "the Training tab's frame", lambda: browser.find_elements(By.TAG_NAME, "iframe"), timeout=60
    )
    tab = wait_until(
        "the Training tab",
        lambda: [e for e in browser.find_elements(By.XPATH, "//*[text()='Training']") if e.is_displayed()],
        timeout=30,
    )
    assert tab
    browser.switch_to.frame(frames[0])
    svg = wait_until("the chart", lambda: browser.find_elements(By.TAG_NAME, "svg"), timeout=60)
    text = browser.find_element(By.TAG_NAME, "body").text
    assert "val_accuracy" in text and "step-3" in text, text[:2000]
    assert svg[0].find_elements(By.CSS_SELECTOR, "polyline, path")  # the curve is drawn
    browser.switch_to.default_content()
    shot = browser.get_screenshot_as_png()
    assert len(shot) > 10_000
    if os.environ.get("UPDATE_SCREENSHOT"):
        (DOCS / "training-tab.png").write_bytes(shot)


def test_a_run_triggered_from_the_ui_form_succeeds(production: Production, browser: Any) -> None:
    """The Trigger dialog (a logical date pre-filled, Params as form fields) -> a successful training run."""
    from selenium.webdriver.common.by import By

    dag_id = "short_training"
    before = {r["dag_run_id"] for r in production.rest.runs(dag_id)}
    base = production.stack.url
    log_in(browser, production.stack.url, production.stack.password)
    browser.get(f"{base}/dags/{dag_id}")

    def trigger_buttons() -> list[Any]:
        return [
            b
            for b in browser.find_elements(By.TAG_NAME, "button")
            if b.is_displayed() and b.text.strip() == "Trigger"
        ]

    wait_until("the Trigger button", trigger_buttons, timeout=60)[0].click()
    submit = wait_until("the dialog's Trigger button", lambda: trigger_buttons()[1:], timeout=30)[-1]
    browser.execute_script("arguments[0].scrollIntoView();", submit)
    submit.click()
    new = wait_until(
        "the run the form created",
        lambda: [r for r in production.rest.runs(dag_id) if r["dag_run_id"] not in before],
        timeout=60,
    )
    run = production.rest.wait_run(dag_id, new[0]["dag_run_id"], timeout=300)
    assert run["state"] == "success" and run["run_type"] == "manual"
