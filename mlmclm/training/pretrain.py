"""The pretraining loop: MLM, CLM and their phase schedules, on accelerate, resumable bit for bit.

    mlmclm pretrain CONFIG.yaml [dotted.key=value ...]

One model (`MlmClmForMaskedLM`: body + output layer, sparse loss over labelled positions) trains under every
objective: CLM feeds it next-token labels with causal attention, MLM masked-token labels with bidirectional attention.
A mixed phase (`mix1clm15mlm40`) splits every global batch: its first rows CLM, the rest MLM, each part its own forward
call with its own attention; an alternating phase (`alt1clm1mlm40`) trains one objective a step, a masking-ratio ramp
(`mlm40to20`) MLM at each step's own ratio (`mlmclm.schedule`); the log and the checkpoints name the phase.
A run's step s reads global samples o+(s-1)*B .. o+s*B-1 of the token stream (o = data.offset) and draws its masks
from a generator seeded by (seed, s): the data and masks of a step do not depend on how many processes run it or on
where it was resumed.

Run folder `results/runs/<scale>/<run_id>/`: config.yaml (resolved), pretrain.csv, meta.json. Checkpoints
`checkpoints/<scale>/<run_id>/step_NNNNNN/`: accelerate state (model, optimizer, RNG) for resume, `hf/` (the model
and tokenizer in transformers format) and trainer_state.json. Every checkpoint is written under a temporary name and
renamed when complete; `mlmclm.training.checkpoints` owns that layout.

A run is its resolved config (config.yaml): its identity (`runs.identity`) is stored in meta.json and in every
checkpoint's trainer state, and a results folder or a checkpoint folder of another identity is refused in one line
naming both (`mlmclm.training.ownership`), so a run never removes, overwrites or resumes another run's checkpoints.

`pretrain` checks what it can before any work, then builds the run (`mlmclm.training.build`: the accelerator, the
data, the model and its optimizer) and trains it (`Trainer`).
"""

from __future__ import annotations

import contextlib
import copy
import csv
import errno
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint import CheckpointException

from .. import locks, store
from ..config import PretrainConfig, load_config, recipe_path, to_yaml
from ..errors import ConfigError, NonFiniteLoss
from ..io import HUB_ID, check_writable, provenance, shown, write_json, write_text
from ..models.attention import check_backend
from ..models.configuration import MlmClmConfig
from ..models.convert import load_hf_decoder
from ..models.modeling import MlmClmForCausalLM, MlmClmForMaskedLM
from ..paths import CONFIG, LOG, META, hf_dir, run_folder, step_dir, step_of, tmp_dir
from ..runlog import CSV_FIELDS, finished, log_end, truncate
from ..runs import identity
from . import checkpoints, reshard, trackers
from .build import (Built, build, check_data_prepared, distributed_setup, micro_batch_from_memory,
                    start_accelerator)
from .corpus import check_corpus
from .objectives import IGNORE, Schedule, clm_labels, label_positions, mlm_inputs
from .ownership import check_results_named, check_run_folder, check_run_id, claim
from .shards import prepare_shards
from .tokenizer import prepare_tokenizer


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints (their layout: mlmclm.paths; read: mlmclm.store; written: checkpoints.py)
# ---------------------------------------------------------------------------------------------------------------
def export_model(state_dict: dict, config: MlmClmConfig, causal: bool, tokenizer, out: Path) -> None:
    """The model in transformers format, as a causal LM (CLM last) or a masked LM, with its tokenizer."""
    config = copy.deepcopy(config)
    config.is_causal = causal
    cls = MlmClmForCausalLM if causal else MlmClmForMaskedLM
    with torch.device("meta"):
        target = cls(config)
    target.load_state_dict({k: v.detach().float().cpu() for k, v in state_dict.items()}, assign=True)
    if config.tie_word_embeddings:
        target.tie_weights()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    target.save_pretrained(out)
    tokenizer.save_pretrained(out)


# ---------------------------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------------------------
def check_before_work(cfg: PretrainConfig, schedule: Schedule, root: Path, create: bool = True) -> None:
    """What can be checked before any data is built or any step trained (what `--dry-run` runs): the attention backend
    and `micro_batch_size: auto` on this machine, the init checkpoint, the context, the corpus, the output folders
    (`create=False`: checked, not created), a run_id naming another model than the config trains, and a run folder
    of another config under the same run_id, and the data on disk against its record and the model (under a launch,
    that it is prepared: `check_data_prepared`). Folders and files resolve against the working root `root`
    (`PretrainConfig.resolved`)."""
    at = cfg.resolved(root)
    if cfg.model.attention_backend == "flex" and not torch.cuda.is_available():
        check_backend("flex", "cpu")
    if cfg.micro_batch_size == "auto" and not torch.cuda.is_available():
        raise ConfigError("micro_batch_size: auto finds the largest micro-batch that fits a GPU's memory and this "
                          "machine has none; set micro_batch_size to a number (batch_size / processes: the whole "
                          "batch in one pass)")
    check_run_id(cfg)
    if cfg.init.kind == "scratch":
        context = MlmClmConfig.from_size(cfg.model.size, **cfg.model.overrides).max_position_embeddings
        if cfg.data.seq_len > context:
            raise ConfigError(f"data.seq_len ({cfg.data.seq_len}) exceeds the {context}-token context of model size "
                              f"{cfg.model.size}; lower data.seq_len, or widen the model with "
                              f"model.overrides={{max_position_embeddings: {cfg.data.seq_len}}}")
    check_corpus(at.data.corpus)
    for folder in (Path(at.results_dir), Path(at.checkpoints_dir), Path(at.data.root)):
        check_writable(folder, create)
    check_run_folder(cfg, run_folder(at.results_dir, cfg.scale, cfg.run_id))
    if cfg.init.kind == "run":
        src = store.find_checkpoint(at.init.path, root, cfg.init.step)
        if fault := store.damage(src, verify=True):
            raise ConfigError(f"init checkpoint {src} is damaged ({fault}); train it again (its run resumes from "
                              f"its last good checkpoint once this one is removed)")
        if cfg.init.optimizer:
            state = store.read_state(src)
            if state["step"] >= schedule.total:
                raise ConfigError(f"init checkpoint {src} is at step {state['step']}, at or past this run's "
                                  f"{schedule.total} steps")
    if cfg.init.kind == "hf" and not Path(at.init.path).exists() and not HUB_ID.match(cfg.init.path):
        raise ConfigError(f"init.path={cfg.init.path!r} does not exist (nor is it a hub id owner/name)")
    check_data_prepared(at, root)  # a launch's data must be prepared; the data found must match its record and model


def pretrain(cfg: PretrainConfig, report_to: str = "none", *, root: Path) -> Path:
    """Train (or resume, or skip when complete) the run `cfg` describes; returns its run folder. `report_to`: an
    experiment tracker the logged rows also go to (`trackers.REPORT_TO`; not part of the run's identity). `root`: the
    working root the config's relative folders and files resolve against (`io.working_root`, read by the entrance).
    The main process holds the locks of the run folder and of its checkpoints meanwhile (`mlmclm.locks`): a second
    process on the same run waits for it, then finds the run complete."""
    schedule = cfg.schedule()
    check_before_work(cfg, schedule, root)
    work = cfg.resolved(root)  # what the run reads and writes; `cfg`, as written, is its record and identity
    run_dir = run_folder(work.results_dir, cfg.scale, cfg.run_id)
    ckpt_root = run_folder(work.checkpoints_dir, cfg.scale, cfg.run_id)
    with contextlib.ExitStack() as held:
        if os.environ.get("RANK", "0") == "0":  # the main process (accelerate launch sets RANK in each)
            held.enter_context(locks.hold(run_dir))
            held.enter_context(locks.hold(ckpt_root))
        trainer = None
        try:
            if _complete(cfg, schedule, run_dir, ckpt_root, root):
                print(f"{cfg.run_id}: already complete ({shown(run_dir)})")
                return run_dir
            accelerator = start_accelerator(cfg, run_dir, report_to)
            trainer = Trainer(cfg, schedule, run_dir, ckpt_root, accelerator, build(work, schedule, accelerator, root),
                              report_to, work.init.path, root)
            return trainer.run()
        except BaseException as e:  # Ctrl-C or SIGTERM, raised where it landed (a checkpoint writer may wrap it)
            if (cause := _stop_cause(e)) is None:
                raise
            raise KeyboardInterrupt(trainer.interruption(cause) if trainer else f"{cfg.run_id}: interrupted at step "
                                    "0") from None


def _complete(cfg: PretrainConfig, schedule: Schedule, run_dir: Path, ckpt_root: Path, root: Path) -> bool:
    """Whether the run is complete (its log whole, its last checkpoint written, every checkpoint's files as recorded:
    one edited since makes it incomplete, and `Trainer.resume` writes it again); refuses first a results folder or a
    checkpoint folder of another run, or one whose record lies in another results folder."""
    check_run_folder(cfg, run_dir)
    claim(ckpt_root, cfg, write=False)  # refused before any work when they are another run's
    check_results_named(ckpt_root, run_dir, root)
    total = schedule.total
    return (finished(run_dir, total) and store.checkpoint_steps(ckpt_root)[-1:] == [total]
            and checkpoints.first_damaged(ckpt_root) is None)


@dataclass
class Interval:
    """The sums of the log interval under way: loss and label tokens on the device (read once, when its row is
    written), steps and tokens trained, and when it began (`time.perf_counter`)."""
    loss: torch.Tensor
    labels: torch.Tensor
    began: float
    steps: int = 0
    tokens: int = 0

    def reset(self, now: float) -> None:
        self.loss.zero_()
        self.labels.zero_()
        self.steps, self.tokens, self.began = 0, 0, now


@dataclass
class Trainer:
    """One run while it trains, on its accelerator (`build.start_accelerator`) with what `build.build` made. `run`
    is the whole of the training, in named parts: `resume` (where to start), `begin` (the log, the progress bar, the
    step-0 checkpoint), then for each step `train_step` (`forward_backward` over the micro-batches), `log` and
    `checkpoint`, and `end`. Of the fields after `step`, `resume` sets where the run starts and `begin` opens the
    interval, the log and the progress bar (None before it); the last three are fixed when the trainer is made."""
    cfg: PretrainConfig
    schedule: Schedule
    run_dir: Path
    ckpt_root: Path
    accelerator: Any
    built: Built
    report_to: str = "none"
    init_path: str | None = None  # init.path resolved against the working root (`PretrainConfig.resolved`)
    root: Path | None = None  # the working root (where the init run's record is found: `store.find_checkpoint`)
    step: int = 0  # the step being trained: what an interruption reports
    writing: int | None = None  # the checkpoint being written (None: none), which an interruption names
    # resume
    start: int = 0  # the step training resumes after (0: none done)
    elapsed: float = 0.0  # wall time of this run's earlier sessions
    tokens_seen: int = 0
    # begin
    interval: Interval | None = None
    log_file: Any = None  # pretrain.csv, open for appending (main process only)
    writer: csv.DictWriter | None = None
    bar: Any = None  # the progress bar
    t0: float = 0.0  # time.perf_counter() at the run's start, its earlier sessions' wall time counted
    last_loss: float | None = None  # the mean loss of the last row written
    # fixed when the trainer is made (__post_init__)
    micro: int = 0  # sequences a forward pass (`micro_batch_size`, or what `auto` found; 0: set from the config)
    special: torch.Tensor = field(init=False)  # the tokenizer's special ids, never masked (on the host)
    named: set = field(init=False)  # the checkpoint steps never pruned
    bad_step: torch.Tensor = field(init=False)  # the first step whose loss was not finite (0: none)
    provenance: dict = field(init=False)  # the commit, versions and hardware of the code that trains, read at its start

    def __post_init__(self):
        cfg, schedule, device = self.cfg, self.schedule, self.accelerator.device
        self.provenance = provenance()  # not at the end: the checkout may have moved on while it trained
        self.special = torch.tensor(self.built.tokenizer.all_special_ids)
        if not self.micro and cfg.micro_batch_size != "auto":
            self.micro = cfg.micro_batch_size
        self.named = set(cfg.checkpoint.steps) | {schedule.total}
        if cfg.checkpoint.pre_decay and schedule.decay:
            self.named.add(schedule.decay_start)
        self.bad_step = torch.zeros((), dtype=torch.long, device=device)

    def run(self) -> Path:
        """The run: resumed, trained to its last step, ended."""
        self.resume()
        if not self.micro:  # micro_batch_size: auto
            self.micro = micro_batch_from_memory(self.cfg, self.built, self.accelerator)
            if self.accelerator.is_main_process:
                print(f"{self.cfg.run_id}: micro_batch_size auto: {self.micro} sequences a forward pass")
        self.begin()
        for step in range(self.start + 1, self.schedule.total + 1):
            self.step = step
            self.train_step(step)
            is_ckpt = step in self.named or step % self.cfg.checkpoint.every == 0
            if step % self.cfg.log_every == 0 or is_ckpt or step == self.schedule.total:
                self.log(step)
            self.bar.update(1)
            if is_ckpt:
                self.checkpoint(step)
        self.end()
        return self.run_dir

    # ---- resume ----
    def resume(self) -> None:
        """Where to start: this run's own last checkpoint (those past its log's last valid row dropped: their steps
        are trained again), else the init checkpoint's step (a biphasic run, init.optimizer), else 0. The main
        process then writes config.yaml, cuts pretrain.csv back to that step and marks meta.json running."""
        cfg, accelerator, root = self.cfg, self.accelerator, self.ckpt_root
        if accelerator.is_main_process:
            claim(root, cfg)
            checkpoints.clear_temporary(root)
            own = checkpoints.last_verified(root)
            good = log_end(self.run_dir / LOG)
            if own is not None and step_of(own) > good:  # log rows lost: train their steps again
                checkpoints.drop_after(root, good)
        accelerator.wait_for_everyone()
        own = store.last(root)
        resume_from = own or (store.find_checkpoint(self.init_path, self.root, cfg.init.step) if cfg.init.optimizer
                              else None)
        if resume_from is not None:
            reshard.load_state(accelerator, resume_from, self.built.model, self.built.optimizer)
            state = store.read_state(resume_from)
            self.start = state["step"]
            if own:
                self.elapsed, self.tokens_seen = state["wall_time_s"], state["tokens_seen"]
        if accelerator.is_main_process:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_text(self.run_dir / CONFIG, to_yaml(cfg))
            truncate(self.run_dir / LOG, self.start)
            self.write_meta("running", self.elapsed, None)

    def begin(self) -> None:
        """The first interval's sums, pretrain.csv open for appending (its header when new), the progress bar, and
        the step-0 checkpoint when named and not written yet (the initial weights)."""
        from tqdm.auto import tqdm

        cfg, schedule, device = self.cfg, self.schedule, self.accelerator.device
        self.interval = Interval(torch.zeros((), device=device), torch.zeros((), dtype=torch.long, device=device),
                                 began=time.perf_counter())
        if self.accelerator.is_main_process:
            self.log_file = open(self.run_dir / LOG, "a", newline="")
            self.writer = csv.DictWriter(self.log_file, CSV_FIELDS)
            if self.log_file.tell() == 0:
                self.writer.writeheader()
        self.bar = tqdm(total=schedule.total, initial=self.start, desc=cfg.run_id, unit="step",
                        disable=not self.accelerator.is_main_process)
        self.t0 = time.perf_counter() - self.elapsed
        step_0 = step_dir(self.ckpt_root, 0)
        if self.start == 0 and 0 in self.named and not store.complete(step_0):
            self.save(0, schedule.objective(1).is_causal,
                      {"step": 0, "objective": str(schedule.objective(1)), "lr": 0.0, "tokens_seen": 0,
                       "wall_time_s": 0.0, "named": True})

    # ---- one optimisation step ----
    def train_step(self, step: int) -> None:
        """Step `step`: its learning rate, its global batch (samples o+(s-1)*B .. o+s*B-1) and labels, forward and
        backward over this process's micro-batches, clipping, the optimizer step; then the interval's sums.

        Nothing here waits for the device (no `.item()`, no boolean indexing, no blocking copy; tests/test_fast_step.py
        checks): the batch, its masks and the labelled positions are made on the host and copied to the device
        asynchronously (`to_device`); a non-finite loss is kept on the device (`bad_step`) until `log` reads it."""
        cfg = self.cfg
        parts = self.schedule.parts(step, cfg.batch_size)
        lr = self.schedule.lr_at(step)
        for group in self.built.optimizer.param_groups:
            group["lr"] = lr
        first = cfg.data.offset + (step - 1) * cfg.batch_size
        ids = torch.from_numpy(self.built.blocks.batch(first, cfg.batch_size))
        host_inputs, host_labels = self.objective_batch(ids, parts, step)
        docs = torch.cumsum(ids == self.built.tokenizer.bos_token_id, dim=1) if cfg.data.document_masking else None
        inputs, labels, docs = (self.to_device(x) for x in (host_inputs, host_labels, docs))
        total_labels = (labels != IGNORE).sum()  # over the global batch: the loss normaliser of every process
        step_loss = self.forward_backward(inputs, labels, docs, parts, total_labels, host_labels)
        if cfg.optim.grad_clip:
            self.accelerator.clip_grad_norm_(self.built.model.parameters(), cfg.optim.grad_clip)
        self.built.optimizer.step()
        self.built.optimizer.zero_grad(set_to_none=True)
        self.bad_step = torch.where((self.bad_step == 0) & ~torch.isfinite(step_loss), step, self.bad_step)
        self.interval.loss += step_loss
        self.interval.labels += total_labels
        self.interval.steps += 1
        self.interval.tokens += ids.numel()
        self.tokens_seen += ids.numel()

    def to_device(self, x: torch.Tensor | None) -> torch.Tensor | None:
        """A host tensor on the training device: on a GPU through pinned memory, without waiting for the copy."""
        device = self.accelerator.device
        if x is None or device.type != "cuda":
            return None if x is None else x.to(device)
        return x.pin_memory().to(device, non_blocking=True)

    def objective_batch(self, ids: torch.Tensor, parts, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The inputs and labels of a global batch (on the host), part by part (`Schedule.parts`: rows a..b under an
        objective; one part except in a mixed phase). Every process builds the whole global batch, so its split and
        masks are those of one process, on any device."""
        pieces = [self.objective_inputs(ids[a:b], objective, step) for objective, a, b in parts]
        return torch.cat([p[0] for p in pieces]), torch.cat([p[1] for p in pieces])

    def objective_inputs(self, ids: torch.Tensor, objective, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The inputs and labels of rows `ids` under `objective`: CLM's next tokens, or MLM's masks drawn from a
        host generator seeded by (seed, step) (a step has at most one MLM part): the same masks on a CPU or a GPU."""
        bos = self.built.tokenizer.bos_token_id
        if objective.is_causal:  # labels pre-shifted for the sparse head: position t predicts token t+1
            return ids, clm_labels(ids, bos_token_id=bos, shift=True)  # never predict a document start
        gen = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + step)
        return mlm_inputs(ids, objective.mask_ratio, self.built.tokenizer.mask_token_id, self.special, gen,
                          self.cfg.mlm_recipe, len(self.built.tokenizer))

    def forward_backward(self, inputs, labels, docs, parts, total_labels, host_labels) -> torch.Tensor:
        """Forward and backward over this process's rows of the global batch, a micro-batch at a time (gradients
        synchronised over processes on the last one only); the sum of their losses.

        The loss of the step is the sum of the cross-entropy of every label token of the global batch divided by
        their number (`total_labels`), whatever its objective: in a mixed phase each CLM next-token label and each
        MLM masked-token label weighs the same, so a part weighs its share of the label tokens (at 1:15 with 40%
        masking, the CLM rows hold about 1 / (1 + 15 x 0.4) of them). A micro-batch that straddles the parts runs
        one forward call per part (each with its attention) and one backward of their summed loss. Each call is
        given its labelled positions, found in `host_labels` (the labels on the host): no boolean indexing."""
        accelerator, micro = self.accelerator, self.micro
        world, rank = accelerator.num_processes, accelerator.process_index
        local = self.cfg.batch_size // world
        micro_steps = local // micro
        step_loss = torch.zeros((), device=accelerator.device)
        for m in range(micro_steps):
            first = rank * local + m * micro
            sync = contextlib.nullcontext() if m == micro_steps - 1 else accelerator.no_sync(self.built.model)
            with sync, accelerator.autocast():
                losses = [self.built.model(input_ids=inputs[a:b], labels=labels[a:b], is_causal=objective.is_causal,
                                           document_ids=None if docs is None else docs[a:b],
                                           num_items_in_batch=total_labels,
                                           label_positions=self.to_device(label_positions(host_labels[a:b]))).loss
                          for objective, a, b in _within(parts, first, first + micro)]
                loss = losses[0] if len(losses) == 1 else torch.stack(losses).sum()
                # DDP averages gradients over processes; the loss is a sum over the global batch
                accelerator.backward(loss * world)
            step_loss += loss.detach()
        return step_loss

    # ---- logging ----
    def log(self, step: int) -> None:
        """The row of the interval that ends at `step` (pretrain.csv, the tracker, the progress bar): its mean loss
        summed over processes, its label tokens and throughput. A non-finite loss since the last row stops the run."""
        interval = self.interval
        loss_sum = self.accelerator.reduce(interval.loss, reduction="sum")
        if int(self.bad_step):
            raise NonFiniteLoss(f"{self.cfg.run_id}: non-finite loss at step {int(self.bad_step)}; stopped. The last "
                                f"good checkpoint is kept: {store.last(self.ckpt_root) or 'none'}")
        now = time.perf_counter()
        self.last_loss = float(loss_sum) / interval.steps
        objective = self.schedule.objective(step)
        row = {"step": step, "phase": self.schedule.phase_index(step), "objective": str(objective),
               "lr": f"{self.schedule.lr_at(step):.6g}", "loss": f"{self.last_loss:.6f}",
               "label_tokens": int(interval.labels), "tokens_seen": self.tokens_seen,
               "tokens_per_s": f"{interval.tokens / max(now - interval.began, 1e-9):.1f}",
               "wall_time_s": f"{now - self.t0:.2f}"}
        if self.writer:
            self.writer.writerow(row)
            self.log_file.flush()
        trackers.log(self.accelerator, self.report_to, {**row, "causal": int(objective.is_causal)}, step)
        self.bar.set_postfix(loss=f"{self.last_loss:.3f}", obj=str(objective), tok_s=row["tokens_per_s"])
        interval.reset(now)

    # ---- checkpointing ----
    def checkpoint(self, step: int) -> None:
        """The checkpoint of `step`; then the main process prunes the periodic ones past checkpoint.keep_last."""
        objective = self.schedule.objective(step)
        self.save(step, objective.is_causal,
                  {"step": step, "objective": str(objective), "lr": self.schedule.lr_at(step),
                   "tokens_seen": self.tokens_seen, "wall_time_s": time.perf_counter() - self.t0,
                   "named": step in self.named})
        if self.accelerator.is_main_process:
            checkpoints.prune(self.ckpt_root, self.named, self.cfg.checkpoint.keep_last)

    def save(self, step: int, causal: bool, state: dict) -> None:
        """`_save_checkpoint`, its trainer state stamped with the run's identity, its config.yaml the run's; `writing`
        names its step meanwhile."""
        self.writing = step
        _save_checkpoint(self.accelerator, self.ckpt_root, step, self.built.model, self.built.tokenizer, causal,
                         {**state, "identity": identity(self.cfg)}, to_yaml(self.cfg))
        self.writing = None

    def interruption(self, cause: str = "signal") -> str:
        """What an interruption says (`cause`: `_stop_cause`): the step it stopped, or the checkpoint it stopped
        writing (left under its temporary name, which no reader takes for a checkpoint and a resume removes) and the
        last complete one, where a re-run resumes."""
        why = "interrupted" if cause == "signal" else "stopped as another process of the launch ended (its line " \
            "says why)"
        if self.writing is None:
            return f"{self.cfg.run_id}: {why} at step {self.step}"
        last = store.last(self.ckpt_root)
        kept = last is not None and step_of(last) == self.writing  # stopped once it was published
        return (f"{self.cfg.run_id}: {why} {'after' if kept else 'while'} writing checkpoint {self.writing}"
                f"{'' if kept else ', which is not kept'}; the last complete checkpoint is "
                f"{shown(last) if last else 'none (the run starts over)'}")

    # ---- the end ----
    def end(self) -> None:
        """The log and the progress bar closed, the tracker ended, meta.json marked complete."""
        self.bar.close()
        if self.log_file:
            self.log_file.close()
        trackers.end(self.accelerator, self.report_to)
        if self.accelerator.is_main_process:
            self.write_meta("complete", time.perf_counter() - self.t0, self.last_loss)
        self.accelerator.wait_for_everyone()

    def write_meta(self, status: str, wall: float, loss: float | None) -> None:
        shard_meta = json.loads((self.built.shards / "meta.json").read_text())
        config, distributed = self.built.unwrapped.config, distributed_setup(self.accelerator)
        write_json(self.run_dir / META, {
            "run_id": self.cfg.run_id, "identity": identity(self.cfg), "status": status, "wall_time_s": round(wall, 2),
            "tokens_seen": self.tokens_seen, "final_loss": loss, "attention_backend": config.attention_backend,
            "parameters": config.num_parameters_by_part(), "processes": distributed["processes"],
            "micro_batch_size": self.micro or None,
            "distributed": distributed,
            "precision": "bf16" if self.accelerator.mixed_precision == "bf16" else "fp32",
            "data": {"shards": (Path(self.cfg.data.root) / "shards" / self.built.shards.name).as_posix(), **shard_meta},
            **self.provenance,
        })


PEER_ENDED = "Connection closed by peer"  # gloo's words for a collective whose other process has ended


def _stop_cause(e: BaseException) -> str | None:
    """Why the run stopped, when `e` says it was stopped: "signal" when it is the KeyboardInterrupt of Ctrl-C or
    SIGTERM (`cli.main` raises it) or an error it caused (torch.distributed.checkpoint gathers each process's in a
    `CheckpointException`; one raised while it propagated holds it as its context); "peer" when a collective failed
    as another process of the launch ended (`PEER_ENDED`); None for any other error."""
    causes, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt):
            return "signal"
        if isinstance(e, CheckpointException):
            causes += [_stop_cause(failure) for failure, _ in e.failures.values()]
        elif isinstance(e, RuntimeError) and PEER_ENDED in str(e):
            causes.append("peer")
        e = e.__cause__ or e.__context__
    return "signal" if "signal" in causes else "peer" if "peer" in causes else None


def _within(parts, first: int, end: int) -> list:
    """The parts of a batch (`(objective, a, b)`: rows a..b) cut to rows first..end, those left empty dropped."""
    cut = [(objective, max(a, first), min(b, end)) for objective, a, b in parts]
    return [(objective, a, b) for objective, a, b in cut if a < b]


FULL_BELOW = 64 * 2 ** 20  # bytes free under which a failed checkpoint write is taken for a full disk


def _save_checkpoint(accelerator, root: Path, step: int, model, tokenizer, causal: bool, state: dict,
                     config: str) -> None:
    tmp = tmp_dir(root, step)
    if accelerator.is_main_process:
        checkpoints.begin(root, step)
    accelerator.wait_for_everyone()
    try:
        accelerator.save_state(str(tmp))
    except RuntimeError as e:  # torch's archive writer reports a full disk as "[enforce fail ...] unexpected pos"
        if shutil.disk_usage(root).free < FULL_BELOW:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp)) from e
        raise
    state_dict = accelerator.get_state_dict(model)  # collective under FSDP: every process takes part
    accelerator.wait_for_everyone()  # every process's own files (its RNG state) written before the folder is renamed
    if accelerator.is_main_process:
        export_model(state_dict, accelerator.unwrap_model(model).config, causal, tokenizer, hf_dir(tmp))
        checkpoints.write_config(tmp, config)
        checkpoints.write_state(tmp, state)
        checkpoints.publish(root, step)
    accelerator.wait_for_everyone()


# ---------------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------------
def pretrain_command(args) -> int:
    cfg, root = load_config(PretrainConfig, recipe_path(args.config), args.overrides), args.root
    if args.dry_run:  # the checks `pretrain` runs before any work, and nothing else
        check_before_work(cfg, cfg.schedule(), root, create=False)
        print(to_yaml(cfg), end="")
        for name, why in cfg.data.unused().items():
            print(f"# data.{name}: not used here ({why})")
        return 0
    run_dir = pretrain(cfg, args.report_to, root=root)
    print(f"{cfg.run_id}: complete; record in {shown(run_dir)}, checkpoints in "
          f"{shown(run_folder(root / cfg.checkpoints_dir, cfg.scale, cfg.run_id))}")
    return 0


def data_command(args) -> int:
    cfg = load_config(PretrainConfig, recipe_path(args.config), args.overrides).resolved(args.root)
    hf_tok = load_hf_decoder(cfg.init.path, cfg.init.gguf_file, model=False)[1] if cfg.init.kind == "hf" else None
    tokenizer = prepare_tokenizer(cfg, hf_tok, root=args.root)
    shards = prepare_shards(cfg, tokenizer, root=args.root)  # built when missing, then checked whole (`shards_fault`)
    meta = json.loads((shards / "meta.json").read_text())
    print(f"shards: {shown(shards)}  train tokens {meta['tokens']['train']:,}  valid tokens "
          f"{meta['tokens']['valid']:,}  vocabulary {meta['vocab_size']:,}; verified whole (each token stream holds "
          "the count meta.json records) and made by the run's tokenizer (its vocabulary, no token id past it): ready "
          "for a multi-process launch")
    return 0
