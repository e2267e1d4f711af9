"""The AdamW of every training loop, pretraining and fine-tuning alike.

Weight decay on the parameters of two or more dimensions (matrices, embeddings), none on the others (norms, biases),
as HF Trainer. Fused wherever torch has a fused AdamW kernel for the device the parameters train on (CUDA, and the
CPU since torch 2.4) and they are floating point; torch's default implementation elsewhere.
"""

from __future__ import annotations

import torch


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Two groups, in the model's parameter order: weight decay on parameters of dim >= 2, none on the rest."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def fused_supported(params, device: torch.device | str | None = None) -> bool:
    """Whether torch has a fused AdamW kernel for `params` on `device` (default: the device each one is on)."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
        supported = set(_get_fused_kernels_supported_devices())
    except ImportError:  # a torch that moved its helper: CUDA has had fused AdamW since torch 2.0
        supported = {"cuda"}
    params = list(params)
    types = {torch.device(device).type} if device is not None else {p.device.type for p in params}
    return types <= supported and all(p.is_floating_point() for p in params)


def build_optimizer(model: torch.nn.Module, lr: float, betas, eps: float, weight_decay: float,
                    device: torch.device | str | None = None) -> torch.optim.AdamW:
    """AdamW over `param_groups(model, weight_decay)`, fused where `fused_supported`. `device`: where the parameters
    will train when that is not where they are now (a model that accelerate moves after the optimizer is built)."""
    groups = param_groups(model, weight_decay)
    fused = fused_supported((p for g in groups for p in g["params"]), device)
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, **({"fused": True} if fused else {}))
