"""One checkpoint folder per DAG run: the run id as one path segment, by a rule that is one-to-one.

Why one-to-one: anyone allowed to trigger a run chooses its run id, and a run resumes from (and its gate
approves) whatever its folder holds. A rule that drops characters (``sec_A+`` and ``sec_A`` both becoming
``sec_A``) lets one run write into another run's history.

The rule, in three disjoint cases (so no two run ids share a folder, the third up to a 64-bit hash):

1. a run id that is already a safe segment (``[A-Za-z0-9._-]``, at most :data:`KEEP_MAX` characters) is its
   own folder, unless it looks like case 2's output;
2. an id Airflow generates (``scheduled__2026-12-01T01:30:00+00:00``, ``manual__...``) keeps the folder the
   nightly DAG always gave it (``:`` and ``+`` become ``-``: ``scheduled__2026-12-01T01-30-00-00-00``), so
   existing checkpoint folders stay where their runs look for them;
3. any other id becomes its safe characters (others replaced by ``_``, cut to 100) followed by ``~`` and 16
   hex digits of the sha256 of the exact id. ``~`` occurs in no output of cases 1 and 2.

Pure and import-light: DAG files use it as a template filter (``{{ run_id | run_folder }}``).
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["run_folder"]

#: The longest run id kept as is (a folder name must fit 255 bytes with room for the base's own segment).
KEEP_MAX = 200
_SAFE = re.compile(r"[A-Za-z0-9._-]+")
_AIRFLOW_ID = re.compile(r"[a-z_]+__\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?\+00:00")
_AIRFLOW_FOLDER = re.compile(r"[a-z_]+__\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d(?:\.\d{1,6})?-00-00")


def run_folder(run_id: str) -> str:
    """The checkpoint folder of the run ``run_id``; a different folder for every different run id."""
    if _AIRFLOW_ID.fullmatch(run_id):
        return run_id.replace(":", "-").replace("+", "-")
    if (
        len(run_id) <= KEEP_MAX
        and _SAFE.fullmatch(run_id)
        and run_id not in (".", "..")
        and not _AIRFLOW_FOLDER.fullmatch(run_id)
    ):
        return run_id
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:100].strip(".")
    return f"{readable}~{digest}"
