"""Parse cost of a DAG file using our operators, relative to a DAG with one EmptyOperator.

Emulates Airflow 3's dag processor (``airflow/dag_processing/processor.py``): the long-lived manager process
has the parsing machinery imported and pre-imports the ``airflow.*`` modules a DAG file names
(``parsing_pre_import_modules``, on by default); then *every* parse forks a child which loads the file
(``BundleDagBag``), serialises its DAGs (``DagSerialization.to_dict``) and exits. Whatever a DAG file imports
beyond ``airflow.*`` - here ``airflow_k8s_ml`` - is therefore imported again in every child, which is why the
package must stay import-light.

Five DAG files: one EmptyOperator (the baseline), one FineTuneJobOperator (the headline ratio: same task
count, so the difference is what our package costs), a three-task pipeline using both training operators and
the sensor, the shipped ``dags/nightly_finetune.py`` (seven tasks, Params, branching), and its *twin*: the
same DAG (id, schedule, Params, default args, template filter names, task ids, trigger rules, retries,
dependencies) with every operator an ``EmptyOperator``. The twin is generated from the real DAG's structure,
read in a fresh interpreter (never in this parent, which must not import our package), so it cannot drift;
nightly vs twin is what the operators cost in a real DAG file (goal <= 1.2). The twin replaces the DAG's two
standard Python operators too; their module is pre-imported by the manager, so only their construction is
counted with ours.

Prints, per DAG file, the median per parse measured three ways - inside the child (load + serialise),
fork-to-exit as the manager sees it, and the child's CPU time (least sensitive to machine load) - and the
ratios to the baseline. Parses are interleaved so that all files see the same load. Goal: <= 1.2.

Run: ``.venv/bin/python bench/parse_cost.py [--parses 30]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

NIGHTLY_DAG = Path(__file__).resolve().parent.parent / "dags" / "nightly_finetune.py"

EMPTY_DAG = """
from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

with DAG("empty", schedule=None, start_date=datetime(2024, 1, 1)):
    EmptyOperator(task_id="noop")
"""

ONE_TASK_DAG = """
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_k8s_ml.operators import FineTuneJobOperator

with DAG("ours", schedule=None, start_date=datetime(2024, 1, 1)):
    FineTuneJobOperator(
        task_id="finetune",
        image="ghcr.io/acme/trainer:1.4",
        command=["python", "-m", "trainer"],
        args=["--resume-from", "{{ resume_from }}"],
        requests={"cpu": "4", "memory": "16Gi"},
        gpus=1,
        namespace="ml",
        resume_from="latest",
        checkpoint_uri="s3://models/finetune",
        run_timeout=timedelta(hours=6),
    )
"""

PIPELINE_DAG = """
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator
from airflow_k8s_ml.sensors import TrainingJobSensor

with DAG("pipeline", schedule=None, start_date=datetime(2024, 1, 1)):
    finetune = FineTuneJobOperator(
        task_id="finetune",
        image="ghcr.io/acme/trainer:1.4",
        command=["python", "-m", "trainer"],
        args=["--epochs", "5", "--resume-from", "{{ resume_from }}"],
        env={"RUN": "{{ run_id }}"},
        secret_env={"HF_TOKEN": "hf-secret:token"},
        env_from=["s3-credentials"],
        requests={"cpu": "4", "memory": "16Gi"},
        gpus=1,
        gpu_resource="nvidia.com/mig-1g.5gb",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        volumes=[{"name": "data", "mount_path": "/data", "pvc": "datasets"}],
        namespace="ml",
        resume_from="latest",
        checkpoint_uri="s3://models/{{ dag.dag_id }}",
        admission_timeout=timedelta(minutes=30),
        startup_timeout=timedelta(minutes=10),
        run_timeout=timedelta(hours=6),
        deadline="{{ (logical_date + macros.timedelta(hours=8)).isoformat() }}",
        queue_name="gpu-queue",
        active_deadline_seconds=8 * 3600,
    )
    distributed = PyTorchJobOperator(
        task_id="ddp",
        image="ghcr.io/acme/trainer:1.4",
        command=["python", "-m", "trainer.ddp"],
        workers=3,
        requests={"cpu": "8", "memory": "32Gi"},
        gpus=1,
        namespace="ml",
        clean_pod_policy="Running",
        run_timeout=timedelta(hours=6),
    )
    wait = TrainingJobSensor(task_id="wait_external", name="nightly-eval", namespace="ml", run_timeout=3600)
    finetune >> distributed >> wait
"""


#: Run in a fresh interpreter (never in the measuring parent, which must not import our package): the
#: nightly DAG's structure as JSON, everything the twin needs to be the same DAG with EmptyOperators.
_READ_STRUCTURE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("nightly_dag", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
(dag,) = [v for v in vars(module).values() if type(v).__name__ == "DAG"]
timetable = dag.timetable
params = {}
for name in dag.params:
    param = dag.params.get_param(name)
    params[name] = {"default": param.value, "description": param.description, "schema": param.schema}
print(json.dumps({
    "dag_id": dag.dag_id,
    "description": dag.description,
    "doc_md": dag.doc_md,
    "schedule": {
        "expression": timetable.expression,
        "timezone": str(timetable.timezone.name),
        "interval": timetable.interval.total_seconds(),
        "run_immediately": timetable.run_immediately.total_seconds(),
    },
    "catchup": dag.catchup,
    "max_active_runs": dag.max_active_runs,
    "dagrun_timeout": dag.dagrun_timeout.total_seconds() if dag.dagrun_timeout else None,
    "default_args": {
        k: (v.total_seconds() if hasattr(v, "total_seconds") else v) for k, v in dag.default_args.items()
    },
    "tags": sorted(dag.tags),
    "filters": sorted(dag.user_defined_filters or {}),
    "params": params,
    "tasks": {
        t.task_id: {"downstream": sorted(t.downstream_task_ids), "trigger_rule": str(t.trigger_rule.value),
                    "doc_md": t.doc_md, "retries": t.retries, "retry_delay": t.retry_delay.total_seconds()}
        for t in dag.tasks
    },
}))
"""


def empty_twin_source(dag_file: Path) -> str:
    """The DAG in ``dag_file`` with every operator an ``EmptyOperator``: same id, schedule, Params, default
    args, task ids, trigger rules and dependencies, read from the real DAG (so the twin cannot drift)."""
    out = subprocess.run(
        [sys.executable, "-c", _READ_STRUCTURE, str(dag_file)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR"},
    ).stdout
    return _twin_source(json.loads(out.strip().splitlines()[-1]))


def _seconds(value: float | None) -> str:
    return "None" if value is None else f"timedelta(seconds={value!r})"


def _twin_source(dag: dict[str, Any]) -> str:
    schedule = dag["schedule"]
    default_args = {k: v for k, v in dag["default_args"].items() if k != "retry_delay"}
    retry_delay = dag["default_args"].get("retry_delay")
    lines = [
        "from datetime import timedelta",
        "",
        "import pendulum",
        "from airflow.providers.standard.operators.empty import EmptyOperator",
        "from airflow.sdk import DAG, CronTriggerTimetable, Param",
        "",
        "",
        "def _same(value):",
        "    return value",
        "",
        "",
        "with DAG(",
        f"    dag_id={dag['dag_id']!r},",
        f"    description={dag['description']!r},",
        "    schedule=CronTriggerTimetable(",
        f"        {schedule['expression']!r},",
        f"        timezone=pendulum.timezone({schedule['timezone']!r}),",
        f"        interval={_seconds(schedule['interval'])},",
        f"        run_immediately={_seconds(schedule['run_immediately'])},",
        "    ),",
        f"    catchup={dag['catchup']!r},",
        f"    max_active_runs={dag['max_active_runs']!r},",
        f"    dagrun_timeout={_seconds(dag['dagrun_timeout'])},",
        f"    default_args={{**{default_args!r}"
        + (f", 'retry_delay': {_seconds(retry_delay)}}}," if retry_delay is not None else "},"),
        f"    tags={dag['tags']!r},",
        "    user_defined_filters={" + ", ".join(f"{name!r}: _same" for name in dag["filters"]) + "},",
        f"    doc_md={dag['doc_md']!r},",
        "    params={",
    ]
    for name, param in dag["params"].items():
        lines.append(
            f"        {name!r}: Param({param['default']!r}, description={param['description']!r}, "
            f"**{param['schema']!r}),"
        )
    lines += ["    },", ") as dag:", "    tasks = {"]
    for task_id, task in dag["tasks"].items():
        lines.append(
            f"        {task_id!r}: EmptyOperator(task_id={task_id!r}, trigger_rule={task['trigger_rule']!r}, "
            f"doc_md={task['doc_md']!r}, retries={task['retries']!r}, "
            f"retry_delay={_seconds(task['retry_delay'])}),"
        )
    lines.append("    }")
    for task_id, task in dag["tasks"].items():
        if task["downstream"]:
            downstream = ", ".join(f"tasks[{d!r}]" for d in task["downstream"])
            lines.append(f"    tasks[{task_id!r}] >> [{downstream}]")
    return "\n".join(lines) + "\n"


def _parse_in_child(path: Path, bundle: Path) -> float:
    """What the dag processor's child does for one file (``processor._parse_file``: stability check, load
    with ``BundleDagBag``, serialise the DAGs) plus encoding the result frame it sends back. Seconds."""
    import structlog
    from airflow.dag_processing.processor import DagFileParseRequest, _parse_file
    from airflow.sdk.execution_time.comms import _RequestFrame

    started = time.perf_counter()
    request = DagFileParseRequest(file=str(path), bundle_path=bundle, bundle_name="bench")
    result = _parse_file(request, structlog.get_logger(logger_name="task"))
    if result is None or result.import_errors or not result.serialized_dags:
        raise SystemExit(f"parse failed: {result and result.import_errors}")
    _RequestFrame(id=0, body=result.model_dump()).as_bytes()
    return time.perf_counter() - started


def _fork_parse(path: Path, bundle: Path) -> tuple[float, float, float]:
    """One parse in a fresh forked child: (in-child parse wall s, fork-to-exit wall s, child CPU s)."""
    read_end, write_end = os.pipe()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_end)
        try:
            os.write(write_end, repr(_parse_in_child(path, bundle)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        inner = pipe.read()
    _, _, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    if not inner:
        raise SystemExit(f"child failed to parse {path}")
    return float(inner), wall, usage.ru_utime + usage.ru_stime


def _preimport(path: Path) -> None:
    """The manager's ``_pre_import_airflow_modules``: only ``airflow.*`` modules named by the file."""
    import importlib

    from airflow.utils.file import iter_airflow_imports

    for module in iter_airflow_imports(str(path)):
        importlib.import_module(module)


def measure(files: dict[str, Path], bundle: Path, parses: int) -> dict[str, list[tuple[float, float, float]]]:
    """Interleaved parses (A, B, A, B, ...) so both files see the same machine load."""
    for path in files.values():
        _preimport(path)
        _fork_parse(path, bundle)  # warm-up (file-system caches, .pyc)
    samples: dict[str, list[tuple[float, float, float]]] = {label: [] for label in files}
    for _ in range(parses):
        for label, path in files.items():
            samples[label].append(_fork_parse(path, bundle))
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parses", type=int, default=30, help="forked parses per DAG file (median reported)")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ.setdefault("AIRFLOW_HOME", str(home / "airflow-home"))
        os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
        os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")  # no per-parse "Filling up" lines
        bundle = home / "dags"
        bundle.mkdir()
        sources = {
            "EmptyOperator": EMPTY_DAG,
            "FineTuneJob": ONE_TASK_DAG,
            "pipeline (3)": PIPELINE_DAG,
            "nightly DAG (7)": NIGHTLY_DAG.read_text(encoding="utf-8"),
            "nightly twin (7)": empty_twin_source(NIGHTLY_DAG),
        }
        files = {label: bundle / f"dag_{i}.py" for i, label in enumerate(sources)}
        for label, source in sources.items():
            files[label].write_text(textwrap.dedent(source))
        # The manager process has the parsing machinery loaded before it ever forks.
        import airflow.dag_processing.dagbag
        import airflow.dag_processing.processor
        import airflow.serialization.serialized_objects  # noqa: F401

        # ... and freezes its heap before the parsing loop (DagFileProcessorManager.before_run), so the
        # children's garbage collections do not touch - and copy - every page of the parent.
        gc.freeze()
        # A deployed package has its bytecode cached; this environment may forbid writing it
        # (PYTHONDONTWRITEBYTECODE), which would make every child compile our sources. Cache bytecode of
        # modules first imported by the children under a private prefix instead (the warm-up parse writes it).
        sys.pycache_prefix = str(home / "pycache")
        sys.dont_write_bytecode = False

        samples = measure(files, bundle, options.parses)
    columns = ("parse (in child)", "fork-to-exit", "child CPU")
    medians = {
        label: [statistics.median(column) for column in zip(*rows, strict=True)]
        for label, rows in samples.items()
    }
    print(f"{'DAG file':<20}" + "".join(f"{c:>20}" for c in columns))
    for label, values in medians.items():
        print(f"{label:<20}" + "".join(f"{v * 1000:>17.2f} ms" for v in values))
    base = medians["EmptyOperator"]
    for label in ("FineTuneJob", "pipeline (3)", "nightly DAG (7)"):
        ratios = [o / b for o, b in zip(medians[label], base, strict=True)]
        print(f"{'ratio ' + label:<20}" + "".join(f"{r:>20.2f}" for r in ratios))
    twin = medians["nightly twin (7)"]
    ratios = [o / b for o, b in zip(medians["nightly DAG (7)"], twin, strict=True)]
    print(f"{'nightly / its twin':<20}" + "".join(f"{r:>20.2f}" for r in ratios))
    headline = medians["FineTuneJob"][1] / base[1]
    print(f"per-parse ratio, one FineTuneJobOperator vs one EmptyOperator (fork-to-exit): {headline:.2f}")
    nightly = medians["nightly DAG (7)"][1] / twin[1]
    print(f"per-parse ratio, nightly DAG vs the same DAG of EmptyOperators (fork-to-exit): {nightly:.2f}")
    print("goal <= 1.2")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
