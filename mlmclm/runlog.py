"""A pretraining run's log in its results folder, torch-free, beside its record (`runs`; `mlmclm.training.pretrain`
writes it, `mlmclm study plan` reads it without importing torch): pretrain.csv's valid rows, whether the run is done and why not, and
the log cut back to the step a resumed run starts from.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ResultFileError
from .io import read_json, write_text
from .paths import LOG, META

CSV_FIELDS = ["step", "phase", "objective", "lr", "loss", "label_tokens", "tokens_seen", "tokens_per_s",
              "wall_time_s"]


def run_fault(run_dir: Path, total: int) -> str | None:
    """Why the run in `run_dir` is not done (None when it is): its meta.json must say complete and its pretrain.csv
    be whole up to step `total`. A run not (yet) done says "not ..."; a damaged file is named by its path."""
    try:
        meta = read_json(run_dir / META) if (run_dir / META).exists() else None
    except ResultFileError as e:
        return str(e)
    if meta is None:
        return "not trained (no meta.json)"
    if not isinstance(meta, dict) or meta.get("status") != "complete":
        return f"not complete (meta.json: status {meta.get('status') if isinstance(meta, dict) else None})"
    good = log_end(run_dir / LOG)
    if good != total:
        return f"{run_dir / LOG}: {'whole up to step ' + str(good) if good else 'no valid row'} of {total}"
    return None


def finished(run_dir: Path, total: int) -> bool:
    """Whether the run in `run_dir` is done (`run_fault`). A damaged file is reported by path (one line) and the run
    counts as not done (a re-run repairs it)."""
    fault = run_fault(run_dir, total)
    if fault and not fault.startswith("not "):
        print(f"{fault}; the run is trained again from its last checkpoint before that", flush=True)
    return fault is None


def valid_rows(path: Path) -> list[str]:
    """The header and the rows of pretrain.csv up to its first damaged line (a wrong field count, a step that is not
    a number or does not grow, a half-written last line); [] when the file is missing or its header is wrong."""
    if not path.exists():
        return []
    text = path.read_text(errors="replace")
    lines = text.split("\n")
    if lines[0] != ",".join(CSV_FIELDS):
        return []
    keep, last = lines[:1], 0
    for ln in lines[1:-1]:  # the text after the last newline is a half-written line (or nothing)
        step = ln.split(",")[0]
        if ln.count(",") != len(CSV_FIELDS) - 1 or not step.isdigit() or int(step) <= last:
            break
        keep.append(ln)
        last = int(step)
    return keep


def log_end(path: Path) -> int:
    """The step of pretrain.csv's last valid row (0 when none): the log is whole up to there."""
    rows = valid_rows(path)
    return int(rows[-1].split(",")[0]) if len(rows) > 1 else 0


def truncate(path: Path, step: int) -> None:
    """pretrain.csv cut back to its valid rows up to `step` (a resumed run's checkpoint), no half-written line kept."""
    if not path.exists():
        return
    keep = [ln for i, ln in enumerate(valid_rows(path)) if i == 0 or int(ln.split(",")[0]) <= step]
    write_text(path, "\n".join(keep) + "\n" if keep else "")
