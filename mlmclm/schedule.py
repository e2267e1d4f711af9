"""The pretraining objectives' names and their schedule, torch-free (the config checks a run's phases with them;
`mlmclm.training.objectives` builds the objectives' inputs and labels).

- `parse_objective("clm" | "mlm40")`: CLM, or MLM with a masking ratio in percent (the paper's run-id spelling).
- `Schedule`: a list of `(objective, steps)` phases sharing one warmup-stable-decay learning-rate schedule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class Objective:
    name: str             # "clm" or "mlm"
    mask_ratio: float = 0.0

    @property
    def is_causal(self) -> bool:
        return self.name == "clm"

    def __str__(self):
        return "clm" if self.name == "clm" else f"mlm{round(self.mask_ratio * 100)}"


def parse_objective(spec: str) -> Objective:
    """`"clm"` or `"mlm{percent}"` (e.g. `"mlm40"`: 40% masking)."""
    m = re.fullmatch(r"(clm|mlm)(\d+(?:\.\d+)?)?", str(spec).strip().lower())
    if not m or (m.group(1) == "clm" and m.group(2)) or (m.group(1) == "mlm" and not m.group(2)):
        raise ConfigError(f"objective {spec!r} is not valid; write 'clm' or 'mlm' with a masking percentage, "
                          f"e.g. 'mlm40'")
    if m.group(1) == "clm":
        return Objective("clm")
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

    def objective(self, step: int) -> Objective:
        """The objective of `step` (1-based)."""
        end = 0
        for o, n in self.phases:
            end += n
            if step <= end:
                return o
        raise ValueError(f"step {step} is past the schedule's {self.total} steps")

    def phase_index(self, step: int) -> int:
        end = 0
        for i, (_, n) in enumerate(self.phases):
            end += n
            if step <= end:
                return i
        raise ValueError(f"step {step} is past the schedule's {self.total} steps")

    def lr_at(self, step: int) -> float:
        if self.warmup and step <= self.warmup:
            return self.lr * step / self.warmup
        if step > self.decay_start and self.decay:
            frac = (step - self.decay_start) / self.decay
            return self.lr * (1 - frac * (1 - self.final_ratio))
        return self.lr
