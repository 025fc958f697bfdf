"""The provider apart from its test bed (docs/architecture.md "Two products").

What goes on Airflow workers is the provider; the local cluster, the embedded S3, the demo and the Airflow
stack tooling are the test bed (``airflow_k8s_ml.testbed``), whose dependencies come with the ``local``
extra. These tests check it where a platform team sees it: every provider module imports without loading
the test bed, and a fresh virtualenv with ``pip install .`` alone (no extras) imports the operators, sensors
and triggers, has none of the test bed's dependencies, and its CLI names the extra to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Imports every provider module (all but the test bed and the torch workloads), then prints what of the
#: test bed or of its dependencies got loaded.
IMPORT_THE_PROVIDER = """
import importlib, pathlib, sys
import airflow_k8s_ml
root = pathlib.Path(airflow_k8s_ml.__file__).parent
for path in sorted(root.rglob("*.py")):
    parts = path.relative_to(root.parent).with_suffix("").parts
    if parts[1] in ("testbed", "workloads") or parts[-1] == "__main__":
        continue
    importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
loaded = sorted(
    name for name in sys.modules
    if name.startswith("airflow_k8s_ml.testbed") or name.split(".")[0] == "moto"
)
print("IMPORTED", sum(1 for name in sys.modules if name.startswith("airflow_k8s_ml")))
print("LOADED", ",".join(loaded))
"""

#: What a DAG file and the triggerer import, in a virtualenv that has only the provider.
IMPORT_THE_SURFACE = """
import importlib.util, sys
import airflow_k8s_ml.operators, airflow_k8s_ml.sensors, airflow_k8s_ml.triggers
import airflow_k8s_ml.triggers.workload, airflow_k8s_ml.ui.plugin
from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator, TrainJobOperator
from airflow_k8s_ml.sensors import TrainingJobSensor
loaded = sorted(name for name in sys.modules if name.startswith("airflow_k8s_ml.testbed"))
missing = [name for name in ("moto",) if importlib.util.find_spec(name) is None]
print("LOADED", ",".join(loaded))
print("NOT INSTALLED", ",".join(missing))
"""


def _last(out: str, prefix: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith(prefix)]
    assert lines, out
    return lines[-1].removeprefix(prefix).strip()


def test_every_provider_module_imports_without_the_test_bed() -> None:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_THE_PROVIDER], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(_last(out.stdout, "IMPORTED")) > 100  # the walk reached the whole provider
    assert _last(out.stdout, "LOADED") == ""


@pytest.fixture(scope="module")
def provider_only_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with ``pip install .`` of a copy of the sources (the checkout stays clean)."""
    root = tmp_path_factory.mktemp("provider-only")
    source = root / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "airflow_k8s_ml", source / "airflow_k8s_ml", ignore=shutil.ignore_patterns("__pycache__")
    )
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    pip = subprocess.run(
        [str(env_dir / "bin" / "pip"), "install", "-q", str(source)],
        capture_output=True,
        text=True,
        timeout=900,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )
    if pip.returncode != 0 and "No matching distribution" in pip.stderr + pip.stdout:
        pytest.skip(f"the package index cannot be reached to build a fresh virtualenv: {pip.stderr[-500:]}")
    assert pip.returncode == 0, (pip.stdout + pip.stderr)[-3000:]
    return env_dir


def _run_in(env_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AIRFLOW"))}
    env["AIRFLOW_HOME"] = str(env_dir / "airflow-home")
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=env_dir)


def test_the_provider_alone_imports_without_the_test_bed_or_its_extra(provider_only_venv: Path) -> None:
    out = _run_in(provider_only_venv, str(provider_only_venv / "bin" / "python"), "-c", IMPORT_THE_SURFACE)
    assert out.returncode == 0, out.stderr[-3000:]
    assert _last(out.stdout, "LOADED") == ""
    assert _last(out.stdout, "NOT INSTALLED") == "moto"


def test_the_cli_without_the_extra_names_it(provider_only_venv: Path) -> None:
    out = _run_in(provider_only_venv, str(provider_only_venv / "bin" / "airflow-k8s-ml"), "local", "up")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "pip install 'airflow-k8s-ml[local]'" in out.stderr
    assert "missing: moto" in out.stderr
