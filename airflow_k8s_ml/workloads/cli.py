"""What every workload entrypoint shares: env-var fallbacks, progress output and the exit-code contract.

Pod commands are configured two ways on purpose: CLI args for what a DAG author writes in
``command``/``args``, env vars for what an operator or a PyTorchJob injects (``RESUME_FROM``, ``MODEL_URI``,
``POD_IP``...). A CLI arg always wins over its env var. Output goes to stdout, flushed per line, because the
operators relay pod logs live and parse ``key=value`` progress lines; a buffered line would arrive late.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Mapping, Sequence

from airflow_k8s_ml.errors import K8sMLError, ValidationError

#: Exit codes of the workloads, documented in docs/workloads.md.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INJECTED_FAILURE = 3


def log(message: str) -> None:
    """Print one progress line to stdout and flush it at once (pod logs are streamed, not read at exit)."""
    print(message, flush=True)


def log_error(message: str) -> None:
    """Print an error line to stderr (Kubernetes pod logs interleave both streams, so it is seen in order)."""
    print(message, file=sys.stderr, flush=True)


def env_str(env: Mapping[str, str], name: str) -> str | None:
    """Read an env var, treating an empty value as unset (manifests often render ``value: ""``)."""
    value = env.get(name)
    return value if value else None


def env_or(env: Mapping[str, str], name: str, default: object) -> object:
    """Default for an argparse option: the env var's raw string if set, else ``default``.

    argparse converts string defaults with the option's ``type``, so env values get the same parsing and the
    same error messages as CLI values.
    """
    value = env_str(env, name)
    return value if value is not None else default


def run_entrypoint(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """Run ``main`` and map failures to exit codes with one readable line instead of a bare traceback.

    Our own errors (:class:`K8sMLError`) and I/O errors are expected operational failures: message only.
    Anything else is a bug: print the traceback so it can be fixed.
    """
    try:
        return main(argv)
    except ValidationError as exc:
        log_error(f"error: invalid argument {exc}")
        return EXIT_USAGE
    except (K8sMLError, OSError) as exc:
        log_error(f"error: {type(exc).__name__}: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        log_error("error: interrupted")
        return 130
    except Exception as exc:
        if type(exc).__module__.startswith("botocore"):
            log_error(f"error: S3 request failed: {exc}")
            return EXIT_ERROR
        traceback.print_exc()
        log_error(f"error: unexpected {type(exc).__name__}: {exc}")
        return EXIT_ERROR


def exit_with(main: Callable[[Sequence[str] | None], int]) -> None:
    """``if __name__ == "__main__"`` helper: run and exit with the mapped code."""
    sys.exit(run_entrypoint(main, None))


def require(value: object, field: str, ok: bool, message: str) -> None:
    """Raise :class:`ValidationError` for ``field`` unless ``ok``; keeps config checks one line each."""
    if not ok:
        raise ValidationError(field, f"{message} (got {value!r})")


__all__ = [
    "EXIT_ERROR",
    "EXIT_INJECTED_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "env_or",
    "env_str",
    "exit_with",
    "log",
    "log_error",
    "require",
    "run_entrypoint",
]
