"""Pretraining objectives and their schedule.

- `parse_objective("clm" | "mlm40")`: CLM, or MLM with a masking ratio in percent (the paper's run-id spelling).
- `mlm_inputs`: each non-special token is selected independently with probability p; the paper's recipe replaces
  every selected token by the mask token (`recipe="mask"`); `"80-10-10"` (mask / random / keep) is an option. Masks
  come from an explicit generator on the training device, so a step's masks are a function of (seed, step) alone.
- `clm_labels`: next-token targets, padding ignored; aligned with the inputs (`MlmClmForCausalLM` shifts) or shifted
  here (`shift=True`: the sparse head of `MlmClmForMaskedLM` run causally, as pretraining and the benchmarks do).
- `Schedule`: a list of `(objective, steps)` phases sharing one warmup-stable-decay learning-rate schedule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from ..errors import ConfigError
from ..models.modeling import IGNORE  # the ignore index, defined beside the losses that use it



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


def mlm_inputs(input_ids: torch.Tensor, mask_ratio: float, mask_token_id: int, special_ids: torch.Tensor,
               generator: torch.Generator, recipe: str = "mask", vocab_size: int | None = None,
               attention_mask: torch.Tensor | None = None):
    """(masked input_ids, labels): labels hold the original token where selected, -100 elsewhere."""
    probs = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    selectable = ~torch.isin(input_ids, special_ids)
    if attention_mask is not None:
        selectable &= attention_mask.bool()
    selected = (probs < mask_ratio) & selectable
    labels = torch.where(selected, input_ids, IGNORE)
    if recipe == "mask":
        return input_ids.masked_fill(selected, mask_token_id), labels
    if recipe != "80-10-10":
        raise ConfigError(f"MLM recipe {recipe!r} is unknown; choose 'mask' or '80-10-10'")
    action = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    random_tokens = torch.randint(vocab_size, input_ids.shape, generator=generator, device=input_ids.device)
    out = torch.where(selected & (action < 0.8), mask_token_id, input_ids)
    return torch.where(selected & (action >= 0.8) & (action < 0.9), random_tokens, out), labels


def clm_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
               bos_token_id: int | None = None, shift: bool = False) -> torch.Tensor:
    """Next-token targets: every real token, padding ignored, and with `bos_token_id` every document start (it is
    never predicted). Aligned with the inputs by default (`MlmClmForCausalLM` shifts); with `shift`, shifted here:
    position t holds token t+1 and the last position IGNORE (`MlmClmForMaskedLM` with `is_causal=True`)."""
    labels = input_ids
    if attention_mask is not None:
        labels = labels.masked_fill(~attention_mask.bool(), IGNORE)
    if bos_token_id is not None:
        labels = labels.masked_fill(labels == bos_token_id, IGNORE)
    if shift:
        labels = torch.cat([labels[..., 1:], torch.full_like(labels[..., :1], IGNORE)], dim=-1)
    return labels


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
