"""The pretraining objectives' names and their schedule, torch-free (the config checks a run's phases with them;
`mlmclm.training.objectives` builds the objectives' inputs and labels).

- `parse_objective(spec)`: one spelling, in run configs and in run ids alike (letters and digits only):
  - `clm`, or `mlm40`: MLM with a masking ratio in percent (the paper's run-id spelling);
  - `mix1clm15mlm40`: a mixed phase (GPT-BERT): every batch split 1 : 15 between CLM (its first rows: causal
    attention, next-token labels) and MLM-40% (the other rows: bidirectional, masked-token labels);
  - `alt1clm1mlm40`: an alternating phase (AntLM): 1 CLM step, then 1 MLM-40% step, repeated from the phase's first
    step (`alt2clm6mlm30`: 2 CLM steps then 6 MLM-30% steps, a period of 8);
  - `mlm40to20`: a masking-ratio ramp, MLM whose masking ratio moves linearly from 40% at the phase's first step to
    20% at its last (step index i of n: 40 + (20 - 40) x i / (n - 1); a one-step phase trains at 40%); both
    percentages in (0, 100), whole and different; increasing ramps too (`mlm15to30`).
  The CLM share comes first in the mixed and alternating ones. A mixed, alternating or ramp phase is no causal
  model: it is exported and fine-tuned as a masked LM.
- `Schedule`: a list of `(objective, steps)` phases sharing one warmup-stable-decay learning-rate schedule; what a
  step trains (`step_objective`: an alternating phase's or a ramp's objective at that step; `parts`: which rows of
  the batch under which objective) and how many steps of each
  output-layer fraction a schedule holds (`output_fractions`, for `mlmclm.flops.schedule_flops`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar, Union

from .errors import ConfigError

FORMS = ("write 'clm', 'mlm' with a masking percentage (e.g. 'mlm40'), a mixed phase 'mix{c}clm{m}mlm{percent}' "
         "(c causal : m masked rows of every batch, e.g. 'mix1clm15mlm40'), an alternating one "
         "'alt{c}clm{m}mlm{percent}' (c CLM steps then m MLM steps, e.g. 'alt1clm1mlm40') or a masking-ratio ramp "
         "'mlm{a}to{b}' (MLM from a% at the phase's first step to b% at its last, linearly, e.g. 'mlm40to20')")


@dataclass(frozen=True)
class Objective:
    """CLM, or MLM at a masking ratio: one objective for a whole batch."""
    name: str             # "clm" or "mlm"
    mask_ratio: float = 0.0

    @property
    def is_causal(self) -> bool:
        return self.name == "clm"

    @property
    def has_mlm(self) -> bool:
        """Whether it masks tokens (the tokenizer needs a mask token)."""
        return self.name == "mlm"

    @property
    def output_fraction(self) -> float:
        """The fraction of a step's positions the output layer computes, as `mlmclm.flops` counts it for the sparse
        head (App. F, Fig. 10): 1 for CLM, the masking ratio for MLM."""
        return 1.0 if self.is_causal else self.mask_ratio

    def parts(self, batch_size: int) -> list[tuple[Objective, int, int]]:
        """`(objective, first row, end row)` of each part of a batch: here the whole batch."""
        return [(self, 0, batch_size)]

    def __str__(self):
        return "clm" if self.name == "clm" else f"mlm{round(self.mask_ratio * 100)}"


CLM = Objective("clm")


@dataclass(frozen=True)
class _Pair:
    """CLM and an MLM objective in shares `clm` : `mlm` (rows of a batch, or steps); the CLM share first."""
    kind: ClassVar[str]
    clm: int
    mlm: int
    masked: Objective  # the MLM objective (its masking ratio)

    is_causal: ClassVar[bool] = False  # exported and fine-tuned as a masked LM
    has_mlm: ClassVar[bool] = True

    def __str__(self):
        return f"{self.kind}{self.clm}clm{self.mlm}{self.masked}"

    def clm_steps(self, steps: int) -> int:
        """CLM's share of the phase's first `steps` steps, in steps: those of an alternating phase that train CLM, a
        mixed phase's CLM rows counted as whole-batch steps (rounded)."""
        return round(steps * self.clm / (self.clm + self.mlm))


class Mixed(_Pair):
    """`mix{c}clm{m}mlm{p}`: every batch split c : m, its first rows CLM, the rest MLM-p%."""
    kind = "mix"

    @property
    def output_fraction(self) -> float:
        """The mean over the batch's rows of each part's `Objective.output_fraction`."""
        return (self.clm + self.mlm * self.masked.mask_ratio) / (self.clm + self.mlm)

    def parts(self, batch_size: int) -> list[tuple[Objective, int, int]]:
        """The CLM rows (the first batch_size x c / (c + m)) and the MLM rows, of every global batch: the split
        depends on the batch alone, never on the processes or micro-batches that run it."""
        share = self.clm + self.mlm
        if batch_size % share:
            raise ConfigError(f"objective {self}: batch_size {batch_size} cannot be split {self.clm}:{self.mlm} "
                              f"between CLM and MLM rows; choose a batch_size that is a multiple of {share}")
        causal = batch_size // share * self.clm
        return [(CLM, 0, causal), (self.masked, causal, batch_size)]


class Alternating(_Pair):
    """`alt{c}clm{m}mlm{p}`: c CLM steps, then m MLM-p% steps, repeated from the phase's first step."""
    kind = "alt"

    def at(self, index: int) -> Objective:
        """The objective of the phase's step `index` (0-based)."""
        return CLM if index % (self.clm + self.mlm) < self.clm else self.masked

    def clm_steps(self, steps: int) -> int:
        """How many of the phase's first `steps` steps train CLM."""
        period = self.clm + self.mlm
        return steps // period * self.clm + min(steps % period, self.clm)


@dataclass(frozen=True)
class Ramp:
    """`mlm{a}to{b}`: MLM whose masking ratio moves linearly from `start`% at the phase's first step to `end`% at its
    last; a step trains plain MLM at its own ratio (`at`)."""
    kind: ClassVar[str] = "ramp"
    start: int  # percent
    end: int

    is_causal: ClassVar[bool] = False  # exported and fine-tuned as a masked LM
    has_mlm: ClassVar[bool] = True

    def __str__(self):
        return f"mlm{self.start}to{self.end}"

    def at(self, index: int, steps: int) -> Objective:
        """MLM at the ratio of the phase's step `index` (0-based) of its `steps`: start + (end - start) x index /
        (steps - 1) percent (a one-step phase: start)."""
        percent = self.start + (self.end - self.start) * index / (steps - 1) if steps > 1 else self.start
        return Objective("mlm", percent / 100)

    def clm_steps(self, steps: int) -> int:
        """None of its steps trains CLM."""
        return 0


AnyObjective = Union[Objective, Mixed, Alternating, Ramp]
_PAIR = re.compile(r"(mix|alt)(\d+)clm(\d+)(mlm.*)")
_RAMP = re.compile(r"mlm(\d+)to(\d+)")


def parse_objective(spec: str) -> AnyObjective:
    """`"clm"`, `"mlm{percent}"` (e.g. `"mlm40"`: 40% masking), `"mix{c}clm{m}mlm{percent}"`,
    `"alt{c}clm{m}mlm{percent}"` or `"mlm{a}to{b}"` (the module docstring)."""
    text = str(spec).strip().lower()
    ramp = _RAMP.fullmatch(text)
    if ramp:
        return _ramp(int(ramp.group(1)), int(ramp.group(2)), spec)
    pair = _PAIR.fullmatch(text)
    if pair:
        kind, clm, mlm = pair.group(1), int(pair.group(2)), int(pair.group(3))
        if clm <= 0 or mlm <= 0:
            raise ConfigError(f"objective {spec!r}: both shares must be positive (got {clm}:{mlm}); a phase of one "
                              f"objective is written 'clm' or '{pair.group(4)}'")
        return (Mixed if kind == "mix" else Alternating)(clm, mlm, _single(pair.group(4), spec))
    return _single(text, spec)


def _ramp(start: int, end: int, spec: str) -> Ramp:
    """The ramp from `start`% to `end`%; `spec` is what the user wrote, for the error."""
    if not (0 < start < 100 and 0 < end < 100):
        raise ConfigError(f"objective {spec!r}: both masking percentages of a ramp must be in (0, 100), got {start} "
                          f"and {end}")
    if start == end:
        raise ConfigError(f"objective {spec!r}: a ramp from {start}% to {end}% does not move; a constant masking "
                          f"ratio is written 'mlm{start}'")
    return Ramp(start, end)


def _single(text: str, spec: str) -> Objective:
    """`clm` or `mlm{percent}`; `spec` is what the user wrote, for the error."""
    m = re.fullmatch(r"(clm|mlm)(\d+(?:\.\d+)?)?", text)
    if not m or (m.group(1) == "clm" and m.group(2)) or (m.group(1) == "mlm" and not m.group(2)):
        raise ConfigError(f"objective {spec!r} is not valid; {FORMS}")
    if m.group(1) == "clm":
        return CLM
    ratio = float(m.group(2)) / 100
    if not 0 < ratio < 1:
        raise ConfigError(f"objective {spec!r}: the masking ratio must be in (0, 1), got {ratio:g}")
    return Objective("mlm", ratio)


class Schedule:
    """Phases `[(objective, steps), ...]` and one warmup-stable-decay learning rate over their total.

    lr(step) for step = 1..total: linear warmup to `lr` over `warmup` steps, constant, then linear decay to
    `lr * final_ratio` over the last `decay` steps. Steps are counted from the start of the whole schedule, so a run
    that resumes another run's checkpoint at step k (biphasic: CLM then MLM) continues the same curve."""

    def __init__(self, phases, lr: float, warmup: int, decay: int, final_ratio: float = 0.0):
        self.phases = [(parse_objective(o) if isinstance(o, str) else o, int(n)) for o, n in phases]
        if not self.phases:
            raise ConfigError("phases must list at least one (objective, steps) pair")
        for o, n in self.phases:
            if n <= 0:
                raise ConfigError(f"phase {o} has {n} steps; every phase needs a positive step count")
        self.total = sum(n for _, n in self.phases)
        if warmup < 0 or decay < 0 or warmup + decay > self.total:
            raise ConfigError(f"warmup ({warmup}) + decay ({decay}) steps must fit in the {self.total} steps "
                              f"of the phases")
        self.lr, self.warmup, self.decay, self.final_ratio = lr, warmup, decay, final_ratio

    @property
    def decay_start(self) -> int:
        """The last step before the learning rate starts to decay (the 'pre-decay' checkpoint)."""
        return self.total - self.decay

    def _locate(self, step: int) -> tuple[int, int]:
        """(the phase index of `step` (1-based), the step's 0-based index within its phase)."""
        start = 0
        for i, (_, n) in enumerate(self.phases):
            if step <= start + n:
                return i, step - start - 1
            start += n
        raise ValueError(f"step {step} is past the schedule's {self.total} steps")

    def objective(self, step: int) -> AnyObjective:
        """The objective of `step`'s phase (1-based step), as the log and the checkpoints name it."""
        return self.phases[self._locate(step)[0]][0]

    def phase_index(self, step: int) -> int:
        return self._locate(step)[0]

    def step_objective(self, step: int) -> Objective | Mixed:
        """What `step` trains: its phase's objective, or an alternating phase's or a ramp's objective at this step
        (a ramp's: plain MLM at the step's masking ratio)."""
        phase, index = self._locate(step)
        o, steps = self.phases[phase]
        if isinstance(o, Ramp):
            return o.at(index, steps)
        return o.at(index) if isinstance(o, Alternating) else o

    def parts(self, step: int, batch_size: int) -> list[tuple[Objective, int, int]]:
        """`(objective, first row, end row)` of each part of `step`'s global batch of `batch_size` rows."""
        return self.step_objective(step).parts(batch_size)

    def check_batch(self, batch_size: int) -> None:
        """A `ConfigError` when a mixed phase cannot split a batch of `batch_size` rows at its ratio."""
        for o, _ in self.phases:
            if isinstance(o, Mixed):
                o.parts(batch_size)

    def output_fractions(self, upto: int | None = None) -> Counter:
        """{output-layer fraction: steps} over steps 1..`upto` (all by default): a mixed step counts its rows' mean
        fraction, an alternating phase and a ramp each step's own objective (`mlmclm.flops.schedule_flops` sums
        them)."""
        counts = Counter()
        for step in range(1, (self.total if upto is None else upto) + 1):
            counts[self.step_objective(step).output_fraction] += 1
        return counts

    def lr_at(self, step: int) -> float:
        if self.warmup and step <= self.warmup:
            return self.lr * step / self.warmup
        if step > self.decay_start and self.decay:
            frac = (step - self.decay_start) / self.decay
            return self.lr * (1 - frac * (1 - self.final_ratio))
        return self.lr
