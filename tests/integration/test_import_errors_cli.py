"""Our parse-time errors read whole where Airflow shows them: ``airflow dags list-import-errors`` prints a
DAG's import error through Rich, whose markup drops every ``[word...]`` (``requests[memory]`` showed as
``requests``, the quantity pattern lost ``[eEinumkKMGTP]``). The CLI is run as a user runs it, on a DAG
with a bad quantity, in a fresh AIRFLOW_HOME; the error must appear exactly as the operator raised it (the
text the UI's import-error banner shows as is)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from airflow_k8s_ml.errors import ValidationError

from ..airflow_env import AIRFLOW, airflow_env, migrate

BAD_QUANTITY = """
from airflow.sdk import DAG
from airflow_k8s_ml.operators import FineTuneJobOperator

with DAG("bad_quantity", schedule=None):
    FineTuneJobOperator(task_id="train", image="python:3.11", requests={"memory": "2 GB"})
"""


def _flat(text: str) -> str:
    """The text without the table's layout: whitespace (wrapping, padding) and column rules."""
    return "".join(ch for ch in text if not ch.isspace() and ch != "|")


def test_list_import_errors_shows_a_bad_quantitys_whole_message(tmp_path: Path) -> None:
    from airflow_k8s_ml.operators import FineTuneJobOperator

    with pytest.raises(ValidationError) as raised:
        FineTuneJobOperator(task_id="train", image="python:3.11", requests={"memory": "2 GB"})
    message = str(raised.value)
    assert '["memory"]' in message and "[EinumkKMGTPe]" in message, message  # what Rich leaves alone

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "bad_quantity.py").write_text(BAD_QUANTITY)
    env = airflow_env(tmp_path / "home", dags)
    migrate(env)
    shown = subprocess.run(
        [AIRFLOW, "dags", "list-import-errors", "--local"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 1, shown.stderr[-3000:]  # the command's "there are import errors"
    assert _flat(message) in _flat(shown.stdout), f"{message!r} not shown whole in:\n{shown.stdout}"
