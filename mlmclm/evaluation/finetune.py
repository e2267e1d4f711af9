"""The paper's fine-tuning protocol (its Section 4; README "Fine-tuning") over grids of learning rates x seeds.

    mlmclm finetune MODEL_DIR --scale mini --groups SC,TC,QA,IR [--datasets ...] [--lrs ...] [--seeds ...]

Any transformers checkpoint folder (or hub id, where a hub is reachable) can be fine-tuned
(`checkpoint.open_checkpoint`): mlmclm checkpoints as they are; Llama-family decoders and EuroBert converted to mlmclm
on the fly (`models.convert.from_hf`); any other encoder through `AutoModel` under the same heads
(`models.any_encoder`).
Every model is fine-tuned with bidirectional attention (`is_causal=False`), CLM-pretrained ones included (the
`is_causal` setting fine-tunes an mlmclm or converted model causally instead):
- SC: mean pooling + linear head, cross-entropy; accuracy.
- TC: a linear layer on every token, the label on the first sub-word of each word; span F1 or tag accuracy.
- QA: start/end logits over windows (with a stride) of long contexts, n-best span post-processing; SQuAD F1 (+ EM).
- IR: mean-pooled embeddings, InfoNCE with in-batch negatives (cosine x `ir_logit_scale`); NDCG@10 over the corpus
  of judged documents. One training (on the `train_on` dataset) is evaluated on every IR dataset, zero-shot.
Each group's encoding, batches, loss, evaluation, head and majority-class floor are its module in `groups`.

AdamW (0.9, 0.95, eps 1e-5, weight decay 0.1; fused), 10% warmup then linear decay (transformers' schedule), gradient
clipping at 1.0, at most `max_steps` steps or `epochs` epochs (one by default). Batches group sequences of similar
lengths and are padded to their own longest sequence. Evaluation runs after training, on validation and test; with
several epochs validation is also scored after each earlier epoch (`validation.curve`: [step, score] pairs, the
final one included), which is how a calibration shows that fine-tuning has plateaued; `curve_epochs` k keeps the last k
earlier epochs only (the plateau gate reads the last epoch's gain; the training is the same).

With `screen_seeds` k, a protocol's first k seeds are its screen, trained at every rate; each later seed is trained at
the rate with the best mean validation over the screen only (`grid.screen_split`, `grid.screen_choice`).

A grid's runs go one after another, or with `grid_workers` W > 1 (0: one a torch thread) on W forked processes
with 1/W of the torch threads each (`workers`): every run is the same computation either way, so the results are the
same (tests/test_finetune.py checks it). `mlmclm bench finetune` measures the speed-up.

One `results.json` per (model, group, dataset, lr, seed) at
`<results_dir>/<scale>/<model_id>/<group>/<dataset>/lr{LR}_sd{seed}/results.json` (LR: `lr_text`), written
atomically; a grid re-run skips the runs whose file is complete (`grid.result_fault`: it parses, holds its scores, and
its `meta.config` has this grid's protocol settings), redoes the others, and holds the model folder's lock
(`mlmclm.locks`) meanwhile. Forked workers end with their parent, however it ends. Choosing the learning rate and
averaging seeds is `mlmclm.results`' job.
"""

from __future__ import annotations

import collections
import json
import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch

from .. import locks
from ..config import DatasetProtocol, FinetuneConfig, finetune_config, scale_config, to_dict
from ..errors import FinetuneError
from ..io import lr_text, provenance, repo_relative, shown, typed_path, write_json
from ..paths import RESULTS, run_folder
from ..training import trackers
from ..training.optim import build_optimizer
from .checkpoint import Checkpoint, attention_backend, check_head, load_model, max_length, open_checkpoint
from .grid import (OUTSIDE_GRID, cell_dir, grid_cells, jobs_to_do, plan_grid, screen_choice, screen_split,
                   set_aside_outside)
from .groups import HANDLERS, encode, evaluate, majority
from .groups.shared import autocast
from .tasks import Task, group_datasets, load_task, tasks_dir
from .workers import grid_workers, run_jobs


# ----------------------------------------------------------------------------------------------- training

def batch_plan(lengths: list[int], batch_size: int, rng: np.random.Generator, group_lengths: bool = True,
               megabatch: int = 50) -> list[np.ndarray]:
    """One epoch of batches (index arrays) in random order. With `group_lengths`, the shuffled examples are cut into
    mega-batches of `megabatch` batches, each sorted by length before it is cut into batches (as transformers'
    LengthGroupedSampler), so a batch pads little."""
    perm = rng.permutation(len(lengths))
    if group_lengths:
        lengths = np.asarray(lengths)
        size = batch_size * megabatch
        perm = np.concatenate([c[np.argsort(-lengths[c], kind="stable")]
                               for c in (perm[i:i + size] for i in range(0, len(perm), size))])
    batches = [perm[i:i + batch_size] for i in range(0, len(perm), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))] if group_lengths else batches


def feature_length(f: dict) -> int:
    """The tokens of a training example (IR: its query's and its document's), by which `batch_plan` groups them."""
    return len(f["doc"]) + len(f["query"]) if "doc" in f else len(f["input_ids"])


def train(model, task: Task, features: list[dict], cfg: FinetuneConfig, lr: float, seed: int, pad_id: int,
          device: torch.device, on_epoch=None) -> dict:
    """At most `max_steps` (task override first) steps or `cfg.epochs` epochs, each epoch in a new random order;
    `on_epoch(step)` is called after every epoch but the last one trained (after the last `cfg.curve_epochs` of those
    only, where set). Returns steps, examples and mean loss."""
    from transformers import get_linear_schedule_with_warmup

    rng = np.random.default_rng(seed)
    lengths = [feature_length(f) for f in features]
    plan = [b for _ in range(cfg.epochs) for b in batch_plan(lengths, cfg.batch_size, rng, cfg.length_grouping)]
    per_epoch = math.ceil(len(features) / cfg.batch_size)
    max_steps = task.max_steps if task.max_steps is not None else cfg.max_steps
    plan = plan if max_steps == -1 else plan[:max_steps]
    epoch_ends = list(range(per_epoch, len(plan), per_epoch))  # before the last step: the end scores it anyway
    epoch_ends = set(epoch_ends[-cfg.curve_epochs:] if cfg.curve_epochs else epoch_ends)
    o = cfg.optim
    opt = build_optimizer(model, lr, o.betas, o.eps, o.weight_decay)
    sched = get_linear_schedule_with_warmup(opt, math.ceil(o.warmup_ratio * len(plan)), len(plan))
    group = HANDLERS[task.group]
    model.train()
    loss_sum = torch.zeros((), device=device)
    for step, idx in enumerate(plan, 1):
        batch = {k: v.to(device) for k, v in group.collate([features[i] for i in idx], pad_id).items()}
        with autocast(device):
            loss = group.loss(model, batch, cfg)
        loss.backward()
        if o.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        loss_sum += loss.detach()
        if on_epoch is not None and step in epoch_ends:
            model.eval()
            on_epoch(step)
            model.train()
    model.eval()
    return {"train_steps": len(plan), "train_examples": int(sum(len(i) for i in plan)),
            "train_loss": float(loss_sum) / max(len(plan), 1)}


# ----------------------------------------------------------------------------------------------- the grid

def run_grid(model_dir: str | Path, cfg: FinetuneConfig, model_id: str | None = None, progress: bool = True,
             pairs: list[tuple[FinetuneConfig, Task, list[Task]]] | None = None, report_to: str = "none",
             *, root: Path, trust_remote_code: bool = False, own_grid: bool = False) -> dict:
    """Fine-tune `model_dir` on every (dataset, lr, seed) of `cfg` (each dataset under its own protocol) whose
    results.json is missing, one run after another here or, with `grid_workers` > 1, on forked worker processes (same
    results: each run is the same computation, on its own thread share). Bad input (names, checkpoint, labels, head)
    fails before any training. `pairs`: `plan_grid(cfg)` when the caller has it already (a study's plan).
    `report_to`: a tracker each run is also logged to (`trackers.log_run`). `root`: the working root the config's
    results_dir and data_dir resolve against (`io.working_root`, read by the entrance). `trust_remote_code`: the
    opt-in to run a checkpoint's own code (`checkpoint.check_own_code`; `meta.trust_remote_code`). `own_grid`: the
    grid is the scale's own (rates and seeds not named by hand), so the model folder's results of its datasets outside
    it (an old learning rate's) are set aside first (`grid.set_aside_outside`), never counted beside it. Returns
    counts and wall time."""
    start = time.perf_counter()
    pairs = plan_grid(cfg) if pairs is None else pairs
    trackers.accelerator_kwargs(report_to, root / cfg.results_dir)  # a missing tracker package: refused before work
    ckpt = open_checkpoint(model_dir, model_id, root=root, trust_remote_code=trust_remote_code)
    _check_fits(ckpt, cfg, pairs)
    out = collections.Counter()
    with locks.hold(tree := run_folder(root / cfg.results_dir, cfg.scale, ckpt.model_id)):  # what is done: read here
        if own_grid:
            _set_aside(tree, root, ckpt.model_id, pairs)
        for c, group in _by_protocol(pairs):
            out.update(_run_protocol(ckpt, c, group, progress, report_to, root))
        if own_grid:  # a screen completed here: its later seeds' results at the other rates (a full grid's) go aside
            _set_aside(tree, root, ckpt.model_id, pairs)
    return {"runs": out["runs"], "trainings": out["trainings"], "skipped": out["skipped"],
            "seconds": time.perf_counter() - start, "model_id": ckpt.model_id, "workers": max(out["workers"], 1)}


def _set_aside(tree: Path, root: Path, model_id: str, pairs: list[tuple[FinetuneConfig, Task, list[Task]]]) -> None:
    """Set aside the results.json of the model folder `tree` outside its grid (`grid.set_aside_outside`), put back
    those it holds again, and say so in one line."""
    if aside := set_aside_outside(tree, *grid_cells(root, model_id, pairs)):
        print(f"{len(aside)} results.json of {model_id} outside this grid (its datasets' other rates or seeds) set "
              f"aside as {OUTSIDE_GRID}, put back when a grid holds them again, e.g. {shown(aside[0])}", flush=True)


def _check_fits(ckpt: Checkpoint, cfg: FinetuneConfig, pairs: list[tuple[FinetuneConfig, Task, list[Task]]]) -> None:
    """The checkpoint can be fine-tuned on every task of the grid: no causal grid on an encoder, no head of the
    task's kind with other labels (`check_head`), QA windows that overlap by less than half of their length."""
    if cfg.is_causal and ckpt.kind == "encoder":
        raise FinetuneError(f"is_causal=True: {ckpt.path} holds a {ckpt.model_type!r} encoder, which has no causal "
                            f"mode (only mlmclm models and the decoders it converts do)")
    for c, trainer, evaluated in pairs:
        for t in {trainer.name: trainer, **{e.name: e for e in evaluated}}.values():
            check_head(ckpt, t)
            if t.group == "QA" and not c.qa_stride < (length := max_length(c, ckpt)) // 2:
                raise FinetuneError(f"qa_stride={c.qa_stride}: {t.name}'s windows on {ckpt.model_id} are {length} "
                                    f"tokens long (max_length, or the model's context), and must overlap by less "
                                    f"than half of that; lower qa_stride below {length // 2}")


def _by_protocol(pairs: list[tuple[FinetuneConfig, Task, list[Task]]]
                 ) -> list[tuple[FinetuneConfig, list[tuple[Task, list[Task]]]]]:
    """The grid's (training task, evaluated tasks) pairs under each protocol: datasets that share a protocol share
    data loading and workers."""
    protocols = {}
    for c, trainer, evaluated in pairs:
        protocols.setdefault(json.dumps(to_dict(c), sort_keys=True), (c, []))[1].append((trainer, evaluated))
    return list(protocols.values())


def _run_protocol(ckpt: Checkpoint, cfg: FinetuneConfig, pairs: list[tuple[Task, list[Task]]], progress: bool,
                  report_to: str, root: Path) -> dict:
    """`run_grid`'s work for the datasets of one protocol (under the model folder's lock): the jobs still to do,
    their data, then the runs. A screened protocol (`grid.screen_split`) runs its screen first, then its later seeds
    at the rate the screen chose for each evaluated dataset (`grid.screen_choice`, read back from the screen's
    results.json: a killed grid resumes with the same choice)."""
    screen, later = screen_split(cfg)
    out = _run_jobs(ckpt, cfg, jobs_to_do(ckpt.model_id, cfg, pairs, root, screen), progress, report_to, root)
    out["skipped"] = sum(len(evaluated) for _, evaluated in pairs) * len(cfg.lrs) * len(screen) - out["runs"]
    if later:
        tree = run_folder(root / cfg.results_dir, cfg.scale, ckpt.model_id)
        rates = {e.name: screen_choice(tree, cfg, e) for _, evaluated in pairs for e in evaluated}
        if unchosen := sorted(name for name, lr in rates.items() if lr is None):
            raise FinetuneError(f"{unchosen[0]}'s screen (seeds {screen}) on {ckpt.model_id} is not complete after "
                                f"its runs; run the grid again (it redoes what is incomplete)")
        todo = jobs_to_do(ckpt.model_id, cfg, pairs, root, later, rates)
        more = _run_jobs(ckpt, cfg, todo, progress, report_to, root)
        out["skipped"] += len(rates) * len(later) - more["runs"]
        out = {key: max(out[key], more[key]) if key == "workers" else out[key] + more[key] for key in out}
    return out


def _run_jobs(ckpt: Checkpoint, cfg: FinetuneConfig, todo: list[tuple], progress: bool, report_to: str,
              root: Path) -> dict:
    """Run the jobs `todo` (`grid.jobs_to_do`) of one protocol: their data loaded and encoded, then the runs, here or
    on forked workers; counts of results written, trainings and workers."""
    runs = sum(len(evaluated) for _, evaluated, *_ in todo)
    if not todo:
        return {"runs": 0, "trainings": 0, "skipped": 0, "workers": 0}
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    workers = min(grid_workers(cfg, device), len(todo))
    grid = _prepare_grid(ckpt, cfg, todo, device, workers, report_to, root)
    run_jobs(grid.run, todo, workers, progress, f"finetune {ckpt.model_id}")
    return {"runs": runs, "trainings": len(todo), "skipped": 0, "workers": max(workers, 1)}


def _load_data(cfg: FinetuneConfig, todo: list[tuple], root: Path) -> tuple[dict[str, Task], dict]:
    """The jobs' tasks by name, and their splits by `_data_key`: a task whose splits the run seed draws (NQ) is loaded
    once a seed, any other once (seed None). A training task without a train split fails here. `cfg.data_dir` is
    under the working root `root` (none: the offline suite's `tasks_dir` there, the paper's suite from the hub)."""
    names = {t.name: t for trainer, evaluated, *_ in todo for t in (trainer, *evaluated)}
    keys = [(n, s) for n, t in names.items() for s in (cfg.seeds if t.seeded_split else [None])]
    data_dir = root / cfg.data_dir if cfg.data_dir else tasks_dir(root) if cfg.suite == "offline" else None
    data = {(n, s): load_task(names[n], data_dir, cfg.max_train, cfg.max_eval, seed=s or 0) for n, s in keys}
    for trainer, *_ in todo:
        if "train" not in data[_data_key(trainer, cfg.seeds[0])]:
            raise FinetuneError(f"{trainer.name} has no train split to fine-tune on")
    return names, data


def _prepare_grid(ckpt: Checkpoint, cfg: FinetuneConfig, todo: list[tuple], device: torch.device, workers: int,
                  report_to: str, root: Path) -> _Grid:
    """What the jobs share: their data loaded and encoded once, the majority-class floors, the provenance."""
    names, data = _load_data(cfg, todo, root)
    length = max_length(cfg, ckpt)
    encoded = {k: encode(names[k[0]], splits, ckpt.tokenizer, length, cfg.qa_stride) for k, splits in data.items()}
    return _Grid(ckpt, cfg, encoded, {n: len(d.get("train", ())) for (n, _), d in data.items()}, length, device,
                 provenance(grid_workers=max(workers, 1)),
                 {n: majority(names[n], e) for (n, _), e in encoded.items() if "train" in e}, root, report_to)


def _data_key(task: Task, seed: int) -> tuple[str, int | None]:
    """Where a task's loaded and encoded splits are kept in a grid: per run seed for a `seeded_split` task."""
    return task.name, seed if task.seeded_split else None


@dataclass
class _Grid:
    """What every run of one grid shares: the checkpoint, the encoded data, the provenance."""
    ckpt: Checkpoint
    cfg: FinetuneConfig
    encoded: dict           # (dataset, seed or None) -> its encoded splits (`_data_key`)
    train_pool: dict
    length: int
    device: torch.device
    common: dict
    floors: dict            # dataset -> its majority-class scores (`majority`), computed once a grid
    root: Path              # the working root: where results go, what the recorded checkpoint path is relative to
    report_to: str = "none"  # a tracker each run is also logged to (`trackers.REPORT_TO`)

    def run(self, job: tuple) -> None:
        """Train one (trainer, evaluated tasks, lr, seed) job, then evaluate and write each evaluated task's
        results.json."""
        trainer, evaluated, lr, seed = job
        ckpt, cfg, device = self.ckpt, self.cfg, self.device
        t0 = time.perf_counter()
        model = load_model(ckpt, trainer, seed, cfg.attention_backend, device)
        curves = {t.name: [] for t in evaluated}

        def on_epoch(step: int) -> None:  # validation after an epoch that is not the last
            for t in evaluated:
                split = self.encoded[_data_key(t, seed)]["validation"]
                curves[t.name].append([step, evaluate(model, t, split, cfg, ckpt.pad_id, device)["score"]])
        features = self.encoded[_data_key(trainer, seed)]["train"]["features"]
        stats = train(model, trainer, features, cfg, lr, seed, ckpt.pad_id, device,
                      on_epoch if cfg.epochs > 1 else None)
        train_time = time.perf_counter() - t0
        for task in evaluated:
            t1 = time.perf_counter()
            result = {s: evaluate(model, task, self.encoded[_data_key(task, seed)][s], cfg, ckpt.pad_id, device)
                      for s in ("validation", "test")}
            if cfg.epochs > 1:
                final = [stats["train_steps"], result["validation"]["score"]]
                result["validation"]["curve"] = curves[task.name] + [final]
            if self.floors.get(task.name):
                result["baselines"] = {"majority": self.floors[task.name]}
            result["meta"] = {
                "model_id": ckpt.model_id, "checkpoint": repo_relative(ckpt.path, self.root), "step": ckpt.step,
                "model_type": ckpt.model_type, "trust_remote_code": ckpt.trust_remote_code,
                "scale": cfg.scale, "suite": cfg.suite, "group": task.group, "dataset": task.name,
                "train_dataset": trainer.name, "metric": task.metric, "lr": lr, "seed": seed,
                "attention_backend": attention_backend(model), "is_causal": cfg.is_causal, "max_length": self.length,
                **stats, "train_pool": self.train_pool[trainer.name],
                "n_validation": len(result["validation"]["scores_i"]), "n_test": len(result["test"]["scores_i"]),
                "train_time_s": round(train_time, 3), "eval_time_s": round(time.perf_counter() - t1, 3),
                "wall_time_s": round(time.perf_counter() - t0, 3),
                "task": asdict(task), "config": to_dict(cfg), **self.common,
                "torch_threads": torch.get_num_threads()}
            folder = cell_dir(self.root, cfg, ckpt.model_id, task, lr, seed)
            write_json(folder / RESULTS, result)
            trackers.log_run(self.report_to, folder / "logs", f"{ckpt.model_id}-{task.name}-lr{lr_text(lr)}-sd{seed}",
                             result["meta"]["config"], result["validation"].get("curve", []),
                             {"validation/score": result["validation"]["score"], "test/score": result["test"]["score"],
                              "train/loss": stats["train_loss"]}, stats["train_steps"])


# ----------------------------------------------------------------------------------------------- command line

def finetune_command(args) -> int:
    root = args.root  # --runs-dir and --data-dir: read from the working directory, named as the config names
    folders = (("results_dir", typed_path(args.runs_dir, root)), ("data_dir", typed_path(args.data_dir, root)))
    overrides = [f"{key}={value}" for key, value in (("suite", args.suite), *folders) if value is not None]
    overrides += [f"{key}=[{value}]" for key, value in (("groups", args.groups), ("datasets", args.datasets),
                                                        ("lrs", args.lrs), ("seeds", args.seeds)) if value is not None]
    scale = scale_config(args.scale)
    if args.groups and args.datasets is None and scale.finetune.datasets:  # the scale's datasets of those groups
        kept = group_datasets(args.suite or scale.finetune.suite, scale.finetune.datasets, args.groups.split(","))
        overrides.append(f"datasets=[{','.join(kept)}]")
    cfg = finetune_config(scale, overrides + args.overrides)
    # what the command line sets (--lrs, --seeds, --set epochs=6 ...) is every dataset's, a per_dataset entry's too
    explicit = {key for key in ("lrs", "seeds") if getattr(args, key) is not None}
    explicit |= {o.split("=", 1)[0].strip() for o in args.overrides} & {f.name for f in fields(DatasetProtocol)}
    for entry in cfg.per_dataset.values():
        for key in explicit:
            setattr(entry, key, None)
    out = run_grid(args.model_dir, cfg, args.model_id, report_to=args.report_to, root=root,
                   trust_remote_code=args.trust_remote_code, own_grid=not explicit & {"lrs", "seeds"})
    print(f"{out['runs']} results written ({out['trainings']} trainings), {out['skipped']} already complete, "
          f"in {out['seconds']:.1f} s -> {shown(run_folder(root / cfg.results_dir, cfg.scale, out['model_id']))}")
    return 0
