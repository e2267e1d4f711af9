"""`--report-to tensorboard|trackio|wandb|none`: pretraining and fine-tuning curves in an experiment tracker, through
accelerate's tracker API (`Accelerator(log_with=...)`, `init_trackers`, `log`, `end_training`). The CSV logs stay the
record; a tracker is a view of the same numbers while a run goes. TensorBoard writes event files under the run's
folder (`<run folder>/logs/<name>/`); trackio and wandb log where they are configured.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..errors import ConfigError

REPORT_TO = ("none", "tensorboard", "trackio", "wandb")
_PACKAGES = {"tensorboard": ("tensorboard", "tensorboardX"), "trackio": ("trackio",), "wandb": ("wandb",)}


def accelerator_kwargs(report_to: str, run_dir: Path) -> dict:
    """What `Accelerator(...)` takes to log to `report_to` (nothing for "none"); a tracker whose package is missing
    is a `ConfigError` in one line, before any work."""
    if report_to not in REPORT_TO:
        raise ConfigError(f"--report-to {report_to!r}: choose one of {', '.join(REPORT_TO)}")
    if report_to == "none":
        return {}
    if not any(importlib.util.find_spec(p) for p in _PACKAGES[report_to]):
        raise ConfigError(f"--report-to {report_to} needs the {_PACKAGES[report_to][0]} package: "
                          f"pip install {_PACKAGES[report_to][0]}")
    return {"log_with": report_to, "project_dir": str(Path(run_dir) / "logs")}


def flat(config: dict, prefix: str = "") -> dict:
    """A nested config as the flat scalar dict trackers take (`optim.lr`: 0.003; lists as text)."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat(value, f"{name}."))
        else:
            out[name] = value if isinstance(value, (int, float, str, bool)) else str(value)
    return out


def start(accelerator, report_to: str, name: str, config: dict | str) -> None:
    """Start the tracker's run `name` with the run's resolved config (a dict, or its YAML text)."""
    if report_to != "none":
        import yaml

        accelerator.init_trackers(name, config=flat(yaml.safe_load(config) if isinstance(config, str) else config))


def log(accelerator, report_to: str, values: dict, step: int) -> None:
    """Numbers of `values` (text that parses as a number included) at `step`; others are left out."""
    if report_to == "none":
        return
    numbers = {}
    for key, value in values.items():
        try:
            numbers[key] = float(value)
        except (TypeError, ValueError):
            pass
    accelerator.log(numbers, step=step)


def end(accelerator, report_to: str) -> None:
    if report_to != "none":
        accelerator.end_training()


def log_run(report_to: str, log_dir: Path, name: str, config: dict, curve: list, final: dict, step: int) -> None:
    """One fine-tuning run as a tracker run of its own (`name`; TensorBoard under `log_dir`): its config, its
    validation curve (`[step, score]` pairs, as `validation/score`) and its final numbers at `step`."""
    if report_to == "none":
        return
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    cls = LOGGER_TYPE_TO_CLASS[report_to]
    tracker = cls(name, logging_dir=str(log_dir)) if cls.requires_logging_directory else cls(name)
    if hasattr(tracker, "start"):  # accelerate >= 1.8 starts a tracker apart from building it
        tracker.start()
    tracker.store_init_configuration(flat(config))
    for at, score in curve[:-1]:  # the last point is the final validation score, logged below
        tracker.log({"validation/score": score}, step=at)
    tracker.log(final, step=step)
    tracker.finish()
