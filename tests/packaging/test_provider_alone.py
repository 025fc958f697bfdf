"""The provider apart from its test bed (docs/architecture.md "Two products").

What goes on Airflow workers is the provider; the local cluster, the embedded S3, the demo and the Airflow
stack tooling are the test bed (``airflow_k8s_ml.testbed``), whose dependencies come with the ``local``
extra. These tests check it where a platform team sees it: every provider module imports without loading
the test bed, and a fresh virtualenv with ``pip install .`` alone (no extras) imports the operators, sensors
and triggers, has none of the test bed's dependencies, and its CLI names the extra to install.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The fresh virtualenv's first build resolves against the package index (minutes on a loaded machine).
FRESH_VENV_TIMEOUT = pytest.mark.timeout(1200)

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


def _pip(pip: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(pip), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )


def _checked(result: subprocess.CompletedProcess[str]) -> None:
    if result.returncode != 0 and "No matching distribution" in result.stderr + result.stdout:
        why = result.stderr[-500:]
        pytest.skip(f"the package index cannot be reached to build a fresh virtualenv: {why}")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


def _wheelhouse(pip: Path, source: Path) -> Path:
    """The wheels ``pip install .`` (no extras) resolves to, plus the build backend's, as downloaded by
    ``pip download`` from the index: once per content of pyproject.toml and Python version, kept in the
    user's cache directory.

    Resolving the provider's ~150 dependencies against the index is most of a fresh install's time
    (1-2 minutes, mostly pip's CPU); the resolution is the same until pyproject.toml changes, so it is
    done then, and each run installs from these wheels with ``--no-index``: pip still resolves the
    provider's requirements (no extras) itself, only from this folder."""
    pyproject = (REPO / "pyproject.toml").read_bytes()
    key = hashlib.sha256(pyproject + sys.version.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "airflow-k8s-ml-tests"
    house = cache / f"provider-wheels-{key}"
    if (house / ".complete").exists():
        return house
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{house.name}.partial-", dir=cache))
    try:
        build_requires = tomllib.loads(pyproject.decode())["build-system"]["requires"]
        _checked(_pip(pip, "download", "-q", "-d", str(partial), str(source), *build_requires))
        (partial / ".complete").touch()
        partial.rename(house)
    except OSError:  # another session filled it meanwhile
        if not (house / ".complete").exists():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return house


@pytest.fixture(scope="module")
def provider_only_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with ``pip install .`` of a copy of the sources (the checkout stays clean), from
    the wheels the provider's requirements resolve to (:func:`_wheelhouse`)."""
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
    pip = env_dir / "bin" / "pip"
    wheels = _wheelhouse(pip, source)
    # --no-compile: the imports below compile what they load; byte-compiling all of Airflow proves nothing
    offline = ("--no-compile", "--no-index", "--find-links", str(wheels))
    _checked(_pip(pip, "install", "-q", *offline, str(source)))
    return env_dir


def _run_in(env_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AIRFLOW"))}
    env["AIRFLOW_HOME"] = str(env_dir / "airflow-home")
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=env_dir)


@FRESH_VENV_TIMEOUT
def test_the_provider_alone_imports_without_the_test_bed_or_its_extra(provider_only_venv: Path) -> None:
    out = _run_in(provider_only_venv, str(provider_only_venv / "bin" / "python"), "-c", IMPORT_THE_SURFACE)
    assert out.returncode == 0, out.stderr[-3000:]
    assert _last(out.stdout, "LOADED") == ""
    assert _last(out.stdout, "NOT INSTALLED") == "moto"


@FRESH_VENV_TIMEOUT
def test_the_cli_without_the_extra_names_it(provider_only_venv: Path) -> None:
    out = _run_in(provider_only_venv, str(provider_only_venv / "bin" / "airflow-k8s-ml"), "local", "up")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "pip install 'airflow-k8s-ml[local]'" in out.stderr
    assert "missing: moto" in out.stderr
