"""Argument parsing with env fallbacks, the distributed context and the exit-code contract (no torch)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from airflow_k8s_ml.errors import CheckpointError, ValidationError
from airflow_k8s_ml.workloads import batch_predict, finetune, seed, serve
from airflow_k8s_ml.workloads.cli import run_entrypoint
from airflow_k8s_ml.workloads.dataset import DEFAULT_DATA_PATH
from airflow_k8s_ml.workloads.distributed import DistContext, context_from_env

CKPT = "file:///tmp/ckpts/run-1"


def test_finetune_defaults() -> None:
    cfg = finetune.parse_config(["--checkpoint-uri", CKPT], {})
    assert cfg == finetune.FinetuneConfig(checkpoint_uri=CKPT)
    assert cfg.data == DEFAULT_DATA_PATH
    assert (cfg.epochs, cfg.batch_size, cfg.resume_from, cfg.base_model, cfg.fail_at_epoch) == (
        5,
        64,
        None,
        None,
        None,
    )


def test_finetune_env_fallbacks_and_cli_precedence() -> None:
    env = {
        "CHECKPOINT_URI": "s3://bucket/runs/x",
        "EPOCHS": "7",
        "LR": "0.1",
        "RESUME_FROM": "s3://bucket/runs/x/step-2/",
        "BASE_MODEL": "",  # rendered-but-empty env var means unset
        "MAX_TRAIN_SAMPLES": "300",
        "SLEEP_PER_EPOCH": "0.5",
        "FAIL_AT_EPOCH": "4",
    }
    cfg = finetune.parse_config(["--epochs", "3"], env)
    assert cfg.checkpoint_uri == "s3://bucket/runs/x"
    assert cfg.epochs == 3  # CLI wins
    assert cfg.lr == 0.1
    assert cfg.resume_from == "s3://bucket/runs/x/step-2/"
    assert cfg.base_model is None
    assert (cfg.max_train_samples, cfg.sleep_per_epoch, cfg.fail_at_epoch) == (300, 0.5, 4)


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--checkpoint-uri", "/abs/no/scheme"], "checkpoint_uri"),
        (["--checkpoint-uri", "gs://b/p"], "checkpoint_uri"),
        (["--checkpoint-uri", "s3://bucket"], "checkpoint_uri"),
        (["--checkpoint-uri", CKPT, "--epochs", "0"], "epochs"),
        (["--checkpoint-uri", CKPT, "--lr", "-1"], "lr"),
        (["--checkpoint-uri", CKPT, "--resume-from", "http://x/step-1"], "resume_from"),
        (["--checkpoint-uri", CKPT, "--fail-at-epoch", "0"], "fail_at_epoch"),
    ],
)
def test_finetune_rejects_bad_values(argv: list[str], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        finetune.parse_config(argv, {})
    assert info.value.field == field


def test_missing_required_argument_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        finetune.parse_config([], {})
    assert info.value.code == 2
    assert "--checkpoint-uri" in capsys.readouterr().err


def test_serve_config_from_pod_env() -> None:
    cfg = serve.parse_config([], {"MODEL_URI": "s3://m/prod/step-3/", "POD_IP": "127.0.0.7", "PORT": "9000"})
    assert cfg == serve.ServeConfig("s3://m/prod/step-3/", "127.0.0.7", 9000)
    assert serve.parse_config(["--model-uri", CKPT], {}).host == "127.0.0.1"
    assert serve.parse_config(["--model-uri", CKPT], {}).port == 8080
    with pytest.raises(ValidationError):
        serve.parse_config(["--model-uri", CKPT, "--port", "70000"], {})


def test_batch_predict_config() -> None:
    env = {"INPUT_URI": "s3://d/in/", "OUTPUT_URI": "s3://d/out/", "MODEL_URI": "s3://m/step-1/"}
    assert batch_predict.parse_config([], env) == batch_predict.BatchConfig(
        "s3://d/in/", "s3://d/out/", "s3://m/step-1/"
    )
    with pytest.raises(ValidationError) as info:
        batch_predict.parse_config(["--output-uri", "ftp://x"], env)
    assert info.value.field == "output_uri"


def test_seed_needs_something_to_seed() -> None:
    with pytest.raises(ValidationError):
        seed.parse_config([], {})
    assert seed.parse_config(["--input-uri", "file:///tmp/in"], {}).base_model_uri is None


def test_distributed_context_from_pytorchjob_env() -> None:
    assert context_from_env({}) == DistContext()
    assert context_from_env({"WORLD_SIZE": "1", "RANK": "0"}) == DistContext()
    ctx = context_from_env(
        {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "23456"}
    )
    assert ctx == DistContext(2, 1, "127.0.0.1", 23456)
    assert ctx.distributed and not ctx.is_main


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE"),
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE"),
        ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "RANK"),
        ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_PORT": "1"}, "MASTER_ADDR"),
        ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "h"}, "MASTER_PORT"),
    ],
)
def test_inconsistent_distributed_env_fails_fast(env: dict[str, str], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        context_from_env(env)
    assert info.value.field == field


def _raiser(exc: BaseException):  # type: ignore[no-untyped-def]
    def main(argv: Sequence[str] | None) -> int:
        raise exc

    return main


@pytest.mark.parametrize(
    ("exc", "code", "text"),
    [
        (ValidationError("epochs", "must be >= 1"), 2, "error: invalid argument epochs: must be >= 1"),
        (
            CheckpointError("s3://b/step-2/ is incomplete"),
            1,
            "error: CheckpointError: s3://b/step-2/ is incomplete",
        ),
        (FileNotFoundError("no such file"), 1, "error: FileNotFoundError: no such file"),
        (RuntimeError("boom"), 1, "error: unexpected RuntimeError: boom"),
    ],
)
def test_run_entrypoint_maps_errors_to_exit_codes(
    exc: BaseException, code: int, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_entrypoint(_raiser(exc)) == code
    assert text in capsys.readouterr().err


def test_entrypoint_modules_do_not_import_torch_or_boto3() -> None:
    """Parsing args and answering /healthz must not wait for torch; DAG-side imports stay cheap."""
    code = (
        "import sys\n"
        "import airflow_k8s_ml.workloads.finetune, airflow_k8s_ml.workloads.serve\n"
        "import airflow_k8s_ml.workloads.batch_predict, airflow_k8s_ml.workloads.seed\n"
        "import airflow_k8s_ml.workloads.io, airflow_k8s_ml.workloads.distributed\n"
        "print(sorted(m for m in ('torch', 'boto3', 'botocore') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_data_readme_exists() -> None:
    readme = Path(finetune.__file__).parent / "data" / "README.md"
    assert "CC BY 4.0" in readme.read_text()
