"""A duplicate-code scan over the operators: the serving operators repeat none of the runner.

Issue 27 named the pairs that used to be written twice: ``operators/_serving.py`` computing the run key
again (``_workload.py``), the serving operators building their triggers and parsing their deadlines by hand,
the CronJob operator's own submit-or-adopt. Any run of :data:`WINDOW` consecutive significant lines shared
by two of these modules is a copy (what pylint's ``duplicate-code`` reports, without pylint). Left out:
each public operator's explicit signature and its template-field list, which the project's rule wants
written out per operator (``inspect.signature`` lists exactly its arguments).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from pathlib import Path

import airflow_k8s_ml.operators as operators

WINDOW = 5
#: A parameter line of a signature (``name: type = default,``) or an entry of a template-field list.
DECLARATION = re.compile(r"^(\*{0,2}\w+: .*,|\*\*kwargs: Any,|\) -> None:|\*,|\"\w+\",)$")
MODULES = ("_runner.py", "_workload.py", "_serving.py", "inference.py", "batch_inference.py")


def significant(path: Path) -> list[str]:
    """The lines that carry code: stripped, without blanks, comments, imports and lone brackets."""
    out = []
    for line in path.read_text().splitlines():
        text = line.strip()
        if (
            not text
            or text.startswith(("#", "import ", "from "))
            or len(text) <= 3
            or DECLARATION.match(text)
        ):
            continue
        out.append(text)
    return out


def test_no_run_of_lines_is_shared_between_the_runner_and_the_serving_operators() -> None:
    root = Path(operators.__file__).parent
    seen: dict[str, set[str]] = defaultdict(set)
    text: dict[str, str] = {}
    for name in MODULES:
        lines = significant(root / name)
        for i in range(len(lines) - WINDOW + 1):
            chunk = "\n".join(lines[i : i + WINDOW])
            digest = hashlib.sha1(chunk.encode()).hexdigest()
            seen[digest].add(name)
            text[digest] = chunk
    copies = {text[d]: sorted(names) for d, names in seen.items() if len(names) > 1}
    assert not copies, "\n\n".join(f"{names}:\n{chunk}" for chunk, names in copies.items())
