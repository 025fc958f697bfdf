"""The provider metadata: valid against Airflow's own provider_info.schema.json, complete (every operator,
sensor, trigger and extra link of the package is listed), and its config section is what Airflow reads."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import airflow
import jsonschema
from airflow.sdk import BaseOperator, BaseOperatorLink
from airflow.triggers.base import BaseTrigger

import airflow_k8s_ml
from airflow_k8s_ml import operators, sensors
from airflow_k8s_ml.provider import get_provider_info

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Path(airflow.__file__).parent / "provider_info.schema.json"


def _classes(package: object, base: type) -> set[str]:
    """``module.Class`` of every public subclass of ``base`` defined in the package's modules."""
    found = set()
    for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):  # type: ignore[attr-defined]
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, base)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found.add(f"{module.__name__}.{name}")
    return found


def _listed(section: str) -> set[str]:
    return {module for entry in get_provider_info()[section] for module in entry["python-modules"]}


def test_provider_info_validates_against_airflows_schema() -> None:
    jsonschema.validate(get_provider_info(), json.loads(SCHEMA.read_text()))


def test_every_operator_class_of_the_package_is_in_a_listed_module() -> None:
    classes = _classes(operators, BaseOperator)
    assert {f"{operators.__name__}.{module}.{name}" for name, module in operators._EXPORTS.items()} <= classes
    assert {name.rsplit(".", 1)[0] for name in classes} == _listed("operators")


def test_every_sensor_and_trigger_is_in_a_listed_module() -> None:
    assert {name.rsplit(".", 1)[0] for name in _classes(sensors, BaseOperator)} == _listed("sensors")
    from airflow_k8s_ml import triggers

    assert {name.rsplit(".", 1)[0] for name in _classes(triggers, BaseTrigger)} == _listed("triggers")


def test_extra_links_are_the_link_classes_the_operators_declare() -> None:
    info = get_provider_info()
    declared = set()
    for name in _classes(operators, BaseOperator):
        module, cls = name.rsplit(".", 1)
        for link in getattr(importlib.import_module(module), cls).operator_extra_links:
            declared.add(f"{type(link).__module__}.{type(link).__name__}")
    assert set(info["extra-links"]) == declared
    for path in info["extra-links"]:
        module, cls = path.rsplit(".", 1)
        assert issubclass(getattr(importlib.import_module(module), cls), BaseOperatorLink)


def test_plugin_connection_types_and_docs_point_at_real_things() -> None:
    info = get_provider_info()
    (plugin,) = info["plugins"]
    module, cls = plugin["plugin-class"].rsplit(".", 1)
    assert getattr(importlib.import_module(module), cls).name == plugin["name"]
    for used in info["connection-types-used"]:
        module, cls = used["hook-class-name"].rsplit(".", 1)
        assert getattr(importlib.import_module(module), cls).conn_type == used["connection-type"]
    assert "connection-types" not in info  # we define none; re-declaring another provider's warns on start
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (integration,) = info["integrations"]
    assert integration["external-doc-url"] == project["urls"]["Documentation"]
    assert integration["external-doc-url"].endswith("/docs") and "example.invalid" not in json.dumps(info)
    assert info["versions"] == [airflow_k8s_ml.__version__]


def test_config_section_declares_every_option_with_a_default() -> None:
    options = get_provider_info()["config"]["airflow_k8s_ml"]["options"]
    assert options["api_unreachable_timeout"]["default"] == "900"
    assert options["dashboard_url_template"]["default"] == ""
    for name, option in options.items():
        assert option["description"] and option["type"] in ("string", "boolean", "integer", "float"), name


def _last_line_in_airflow(tmp_path: Path, code: str, options: dict[str, str]) -> str:
    """Run ``code`` in a fresh interpreter with its own AIRFLOW_HOME and ``[airflow_k8s_ml]`` options set
    through the environment, as a deployment sets them; its last printed line."""
    env = {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": "/usr/bin:/bin"}
    env.update({f"AIRFLOW__AIRFLOW_K8S_ML__{name.upper()}": value for name, value in options.items()})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_airflow_reads_the_config_defaults_and_overrides(tmp_path: Path) -> None:
    """Through Airflow's own configuration (providers' config merged in), in a fresh interpreter."""
    code = (
        "from airflow.configuration import conf\n"
        "from airflow_k8s_ml import config\n"
        "print(conf.get('airflow_k8s_ml', 'api_unreachable_timeout'),"
        " config.get_float('trigger_heartbeat_seconds'), repr(config.get('dashboard_url_template')))\n"
    )
    assert _last_line_in_airflow(tmp_path, code, {"trigger_heartbeat_seconds": "120"}) == "900 120.0 ''"


def test_the_waits_read_their_timings_from_the_config(tmp_path: Path) -> None:
    """A declared waiting option changes what a wait does (no option is declared and then ignored); a value
    that is not positive reads as the declared default."""
    code = (
        "from airflow_k8s_ml.config import WaitTimings\n"
        "print(tuple(WaitTimings.configured()), tuple(WaitTimings()))\n"
    )
    options = {
        "trigger_heartbeat_seconds": "7",
        "log_relay_max_line": "80",
        "log_relay_lines_per_second": "50",
        "kueue_position_seconds": "3",
        "api_unreachable_timeout": "-1",
        "still_waiting_seconds": "90",
        "fail_fast_stuck": "False",
    }
    configured = "(7.0, 5.0, 10.0, 80, 50.0, 3.0, 900.0, 90.0, False, 120.0)"
    expected = f"{configured} (60.0, 5.0, 10.0, 500, 200.0, 30.0, 900.0, 300.0, True, 120.0)"
    assert _last_line_in_airflow(tmp_path, code, options) == expected
