"""Headless Chromium for the production tier's UI tests (Debian's ``chromium`` + ``chromium-driver``, which
``.ci/run`` installs, and the ``selenium`` bindings of the ``dev`` extra), and the UI's login as a user does
it. Run as root (CI), so ``--no-sandbox``."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster_fixtures import wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def chromium() -> Iterator[Any]:
    """A headless Chromium session (the ``browser`` fixture of ``tests/production/conftest.py``)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=str(DRIVER)), options=options)
    yield driver
    driver.quit()


def log_in(browser: Any, url: str, password: str) -> None:
    """The login form as ``admin``; a no-op when this browser is logged in already."""
    from selenium.webdriver.common.by import By

    browser.get(f"{url}/auth/login/")
    if "/auth/login" not in browser.current_url:
        return
    wait_for(lambda: browser.find_elements(By.NAME, "username"), timeout=60, what="the login form")
    browser.find_element(By.NAME, "username").send_keys("admin")
    browser.find_element(By.NAME, "password").send_keys(password)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(lambda: "/auth/login" not in browser.current_url, timeout=60, what="the UI after login")
