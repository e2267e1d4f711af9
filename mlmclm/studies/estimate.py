"""The compute of a plan: FLOPs of each run and fine-tuning training (`compute`, `part_totals`), and the wall time
of what is missing and of a full run (`estimate`), at the rates this scale's runs on record achieved, the paper's own
GPU-hours, or a share of this machine's measured matmul rate (`machine_rate`).
"""

from __future__ import annotations

import collections
import math
import time
from pathlib import Path

from ..config import REFERENCE
from ..errors import ResultFileError
from ..sizes import SIZES, flops_per_token
from ..io import read_json
from ..paths import META, RESULTS, Paths, cell_folder
from ..evaluation.grid import context_length, plan_grid, screen_split
from .configs import grid_configs
from .design import PAPER_ACCOUNTING, build_plan
from .plan import Plan
from .state import Work


def _shape(plan: Plan, size: str) -> dict:
    """The shape of `size` as the plan trains it (`SIZES`): with the vocabulary of the scale's own tokenizer, or a
    decoder's own (`cpt_decoders`)."""
    data = plan.template.get("data", {})
    decoder = size in {d["size"] for d in plan.scale.cpt_decoders.values()}
    own = not decoder and data.get("tokenizer", "train") == "train" and "vocab_size" in data
    return {**SIZES[size], **({"vocab_size": data["vocab_size"]} if own else {})}


def compute(plan: Plan, grids: dict) -> dict:
    """FLOPs of the plan, by the "model" rule of `mlmclm.flops` (6 x the body's weights and the output layer a
    training token, plus attention: `sizes.flops_per_token`, dense output layer): of each run ("runs": its own steps), of each fine-tuning training ("trainings", by (evaluation key,
    trainer, lr, seed): its steps once, validation every epoch and test on each dataset it is evaluated on), and the
    results.json count of each evaluation ("results"). A screened protocol (`FinetuneConfig.screen_seeds` k) plans k x
    its rates + each later seed once (lr None: the rate its screen chooses); a training whose evaluated datasets
    choose different rates (IR's) is run once at each of them, so it costs more than planned. `grids`: the plan's
    `grid_configs`."""
    seq, batch = plan.template["data"]["seq_len"], plan.template["batch_size"]
    runs = {r.run_id: r.trained * batch * seq * flops_per_token(_shape(plan, r.size), seq) for r in plan.runs.values()}
    trainings, steps_of, results = {}, {}, collections.Counter()
    for key, e in plan.evaluations.items():
        shape = _shape(plan, plan.runs[e.run_id].size)
        for cfg, trainer, evaluated in plan_grid(grids[e.grid]):  # each dataset under its own protocol
            length = context_length(cfg, shape["max_position_embeddings"])
            steps = [cfg.epochs * math.ceil(cfg.max_train / cfg.batch_size)] if cfg.max_train else []
            steps = min(steps + ([cfg.max_steps] if cfg.max_steps > 0 else []), default=0)  # 0: the size is unknown
            train_tokens = steps * cfg.batch_size * length
            eval_tokens = (1 + cfg.epochs) * (cfg.max_eval or 1000) * length  # validation every epoch, test once
            flops = (train_tokens * flops_per_token(shape, length)  # one training, scored on each evaluated set
                     + len(evaluated) * eval_tokens * flops_per_token(shape, length, training=False))
            screen, later = screen_split(cfg)  # a later seed: one training, at the rate its screen chooses (None)
            for lr, seed in [(lr, seed) for lr in cfg.lrs for seed in screen] + [(None, seed) for seed in later]:
                trainings[(key, trainer.name, lr, seed)] = flops
                steps_of[(key, trainer.name, lr, seed)] = steps
                results[key] += len(evaluated)
    return {"runs": runs, "trainings": trainings, "steps": steps_of, "results": results}


def part_totals(plan: Plan, c: dict) -> dict[str, list]:
    """Runs, steps, tokens and FLOPs of each part of the paper's accounting (base, biphasic, cpt), of the
    reference runs and of those beyond the paper (where the plan has them). `c`: the plan's `compute`."""
    tokens_per_step = plan.template["batch_size"] * plan.template["data"]["seq_len"]
    parts = {p: [0, 0, 0, 0.0] for p in ("base", "biphasic", "cpt", REFERENCE)}
    for r in plan.runs.values():
        v = parts.setdefault(r.part, [0, 0, 0, 0.0])  # beyond: only where the plan has such runs
        for i, add in enumerate((1, r.trained, r.trained * tokens_per_step, c["runs"][r.run_id])):
            v[i] += add
    return parts


def machine_rate() -> tuple[float, str]:
    """Measured matmul FLOP/s of this machine (fp32 on CPU, bf16 on a GPU), and what was measured."""
    import torch

    cuda = torch.cuda.is_available()
    n, dtype = (8192, torch.bfloat16) if cuda else (1024, torch.float32)
    dev = "cuda" if cuda else "cpu"
    a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
    for _ in range(2):
        a @ b
    reps, t = 0, time.perf_counter()
    while time.perf_counter() - t < 0.5:
        a @ b
        reps += 1
    if cuda:
        torch.cuda.synchronize()
    rate = 2 * n ** 3 * reps / (time.perf_counter() - t)
    what = torch.cuda.get_device_name() + " bf16" if cuda else f"CPU fp32, {torch.get_num_threads()} thread(s)"
    return rate, what


def _records(paths: Paths) -> list[Paths]:
    """The runs folders whose runs on record give the rates: the plan's, and the working root's (a checkout's
    committed one)."""
    return list({p.results: p for p in (paths, Paths(paths.root))}.values())


def _meta(path: Path) -> dict:
    try:
        doc = read_json(path) if path.is_file() else {}
    except ResultFileError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _hardware(meta: dict) -> str:
    h = meta.get("hardware") or {}
    return h.get("gpu") or f"a {h.get('cpu_count', '?')}-core CPU"


def measured_rate(plan: Plan, paths: Paths) -> tuple[float, int, set] | None:
    """Pretraining FLOP/s that this scale's completed runs on record achieved (their meta.json: tokens_seen in
    wall_time_s, at their size's FLOPs a token), how many runs, and on what hardware; None when there are none."""
    seq = plan.template["data"]["seq_len"]
    flops = wall = n = 0
    where = set()
    for r in plan.runs.values():
        for records in _records(paths):
            meta = _meta(records.run(plan.scale.scale, r.id, r.grid) / META)
            if meta.get("status") == "complete" and meta.get("wall_time_s") and meta.get("tokens_seen"):
                flops += meta["tokens_seen"] * flops_per_token(_shape(plan, r.size), seq)
                wall, n = wall + meta["wall_time_s"], n + 1
                where.add(_hardware(meta))
                break
    return (flops / wall, n, where) if wall else None


def measured_finetune_rate(plan: Plan, paths: Paths, c: dict) -> tuple[float, int, set] | None:
    """Fine-tuning FLOPs per second of wall time over this scale's trainings on record (one results.json per
    training: the one evaluated on its own training set; runs of W worker processes share the wall time), how many
    trainings, and on what hardware; None when there are none. A record made under another protocol counts the
    planned FLOPs scaled by its own training steps (the work it did, not the plan's). `c`: `compute`'s."""
    flops = wall = n = 0
    where = set()
    for (key, trainer, lr, seed), f in c["trainings"].items():
        if lr is None:  # a later seed of a screen: its rate is read from its screen, the screen's records count
            continue
        e = plan.evaluations[key]
        for records in _records(paths):
            tree = records.run(plan.scale.scale, e.model, e.grid)
            found = tree.glob(f"*/{trainer}/{cell_folder(lr, seed)}/{RESULTS}")
            metas = [_meta(path).get("meta") or {} for path in found]
            metas = [m for m in metas if isinstance(m, dict) and m.get("wall_time_s")]
            if metas:
                planned, done = c["steps"][(key, trainer, lr, seed)], metas[0].get("train_steps")
                flops, n = flops + (f * done / planned if planned and isinstance(done, int) else f), n + 1
                wall += metas[0]["wall_time_s"] / metas[0].get("grid_workers", 1)
                where.add(_hardware(metas[0]))
                break
    return (flops / wall, n, where) if wall else None


def estimate(plan: Plan, paths: Paths, grids: dict, state: Work, c: dict | None = None,
             rate: tuple[float, str] | None = None) -> dict:
    """Wall time of what `state` leaves to do ("missing") and of a full run of the plan ("full"), each as seconds of
    (pretraining, fine-tuning), without data building and notebooks, and how it was found ("how"; "gpu": GPU-seconds).
    The rates: those this scale's runs on record achieved (`measured_rate`, `measured_finetune_rate`); at the paper
    scale the paper's own GPU-hours per FLOP; else 40% of this machine's matmul rate (`machine_rate`, or `rate`).
    `c`: the plan's `compute`."""
    c = c or compute(plan, grids)
    pre, ft = sum(c["runs"].values()), sum(c["trainings"].values())
    per_eval = collections.Counter()
    for (key, *_), f in c["trainings"].items():
        per_eval[key] += f
    pre_todo = sum(c["runs"][r.run_id] for r in state.runs)
    ft_todo = sum(per_eval[k] * len(state.missing[k]) / c["results"][k] for k in state.missing)
    if plan.scale.scale == "paper":  # the paper's accounting, per FLOP of the whole paper plan
        whole = plan if len(plan.evaluations) == len(build_plan(plan.scale).evaluations) else build_plan(plan.scale)
        full = c if whole is plan else compute(whole, grid_configs(whole, paths))
        hours = PAPER_ACCOUNTING["gpu_hours"]
        base = sum(f for r, f in full["runs"].items() if whole.runs[r].part == "base")
        pre_s, ft_s = hours["base"] * 3600 / base, hours["finetune"] * 3600 / sum(full["trainings"].values())
        how = ("GPU-hours at the paper's own rates: its 81k GPU-h for its base runs and 9k for its fine-tuning, per "
               "FLOP; this is a GPU cluster's scale, not one for a CPU")
        return {"missing": (pre_todo * pre_s, ft_todo * ft_s), "full": (pre * pre_s, ft * ft_s), "how": how,
                "gpu": True}
    pre_rate, ft_rate = measured_rate(plan, paths), measured_finetune_rate(plan, paths, c)
    if pre_rate or ft_rate:  # a part with no runs on record: the other's rate, measured on the same hardware
        hows = [f"{name} at {r[0] / 1e9:,.1f} GFLOP/s, the rate of this scale's {r[1]} {unit} on record on "
                f"{', '.join(sorted(r[2]))}" for name, r, unit in (("pretraining", pre_rate, "runs"),
                                                                   ("fine-tuning", ft_rate, "trainings")) if r]
        if not (pre_rate and ft_rate):
            hows.append(f"{'fine-tuning' if pre_rate else 'pretraining'} at that rate too (none on record)")
        pre_s, ft_s = 1 / (pre_rate or ft_rate)[0], 1 / (ft_rate or pre_rate)[0]
    else:
        peak, what = rate or machine_rate()
        hows = [f"at 40% of this machine's matmul rate ({peak / 1e9:,.0f} GFLOP/s, {what}): this scale has no runs "
                "on record"]
        pre_s = ft_s = 1 / (0.4 * peak)
    return {"missing": (pre_todo * pre_s, ft_todo * ft_s), "full": (pre * pre_s, ft * ft_s), "how": "; ".join(hows),
            "gpu": False}
