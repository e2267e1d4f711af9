"""Pretraining objectives: their inputs and labels. Their names and schedule (`parse_objective`, `Objective`,
`Schedule`) are torch-free in `mlmclm.schedule`, where the config reads them; they are importable from here too.

- `mlm_inputs`: each non-special token is selected independently with probability p; the paper's recipe replaces
  every selected token by the mask token (`recipe="mask"`); `"80-10-10"` (mask / random / keep) is an option. Masks
  come from an explicit generator (pretraining's is on the host), so a step's masks are a function of (seed, step)
  alone.
- `clm_labels`: next-token targets, padding ignored; aligned with the inputs (`MlmClmForCausalLM` shifts) or shifted
  here (`shift=True`: the sparse head of `MlmClmForMaskedLM` run causally, as pretraining and the benchmarks do).
"""

from __future__ import annotations

import torch

from ..errors import ConfigError
from ..models.modeling import IGNORE  # the ignore index, defined beside the losses that use it
from ..schedule import Objective, Schedule, parse_objective  # noqa: F401  (pretraining and tests import them here)


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


def label_positions(labels: torch.Tensor) -> torch.Tensor:
    """The flat indices of the labelled positions of `labels` (what the sparse loss reads: `label_positions` of
    `MlmClmForMaskedLM`). Computed where the labels are built (on the host), they spare the loss boolean indexing's
    device sync."""
    return (labels.reshape(-1) != IGNORE).nonzero().squeeze(1)
