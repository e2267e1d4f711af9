"""One attention entry point with interchangeable backends.

`attention(q, k, v, is_causal=..., attention_mask=..., document_ids=..., backend=...)` with q: (B, H, T, D) and
k, v: (B, Hkv, T, D) (grouped-query attention when Hkv < H). Query i may attend key j when j is a real token
(attention_mask), both are in the same document (document_ids, when given) and, if causal, j <= i. Outputs at padded
positions are not meaningful (they never reach a real token).

Backends: `eager` (the reference: matmul + softmax), `sdpa` (torch's scaled_dot_product_attention, the default),
`kernels` (a varlen kernel package shipped in `mlmclm/models/kernels/` in the Hugging Face `kernels` layout, CPU and CUDA
variants) and `flex` (FlexAttention, GPU only).
"""

from __future__ import annotations

import logging
import math
from functools import lru_cache
from importlib import resources
from pathlib import Path

import torch
import torch.nn.functional as F

from .configuration import ATTENTION_BACKENDS

log = logging.getLogger(__name__)
KERNEL_DIR = Path(str(resources.files("mlmclm.models") / "kernels" / "varlen_attention"))  # package data


def check_backend(backend: str, device: torch.device | str | None = None) -> None:
    """Raise one clear line when `backend` is unknown or cannot run on `device`."""
    if backend not in ATTENTION_BACKENDS:
        raise ValueError(f"attention backend {backend!r} is unknown; choose one of {', '.join(ATTENTION_BACKENDS)}")
    if backend == "flex" and device is not None and torch.device(device).type == "cpu":
        raise ValueError("attention backend 'flex' is GPU only (FlexAttention has no backward pass on CPU); "
                         "use 'sdpa' or 'kernels' on CPU")


def attention(q, k, v, *, is_causal: bool, attention_mask=None, document_ids=None, backend: str = "sdpa",
              scale: float | None = None):
    check_backend(backend, q.device)
    if attention_mask is not None and bool(attention_mask.all()):
        attention_mask = None
    if backend == "kernels":
        return _kernels(q, k, v, is_causal, attention_mask, document_ids, scale)
    if backend == "flex":
        return _flex(q, k, v, is_causal, attention_mask, document_ids, scale)
    if backend == "sdpa":
        if attention_mask is None and document_ids is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale,
                                                  enable_gqa=q.shape[1] != k.shape[1])
        bias = torch.zeros((), dtype=q.dtype, device=q.device).masked_fill(
            ~allowed_mask(q.shape[2], is_causal, attention_mask, document_ids, q.device), float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale,
                                              enable_gqa=q.shape[1] != k.shape[1])
    return _eager(q, k, v, is_causal, attention_mask, document_ids, scale)


def allowed_mask(t: int, is_causal: bool, attention_mask=None, document_ids=None, device=None):
    """Boolean (B or 1, 1, T, T) mask of the (query, key) pairs that may attend. Every position may attend itself,
    so that a padded query row is never empty (its output is discarded)."""
    ar = torch.arange(t, device=device)
    allowed = torch.ones(1, 1, t, t, dtype=torch.bool, device=device)
    if is_causal:
        allowed = allowed & (ar[None, :] <= ar[:, None])
    if attention_mask is not None:
        allowed = allowed & attention_mask.bool()[:, None, None, :]
    if document_ids is not None:
        allowed = allowed & (document_ids[:, None, :, None] == document_ids[:, None, None, :])
    return allowed | torch.eye(t, dtype=torch.bool, device=device)


def _eager(q, k, v, is_causal, attention_mask, document_ids, scale):
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, k.transpose(-1, -2)) * (scale or 1.0 / math.sqrt(q.shape[-1]))
    scores = scores.masked_fill(~allowed_mask(q.shape[2], is_causal, attention_mask, document_ids, q.device),
                                float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype), v)


# ---- kernels: unpad to documents, call the varlen kernel, pad back ----
@lru_cache(maxsize=None)
def load_kernel(device_type: str):
    """The varlen attention kernel for `cpu` or `cuda`, loaded from the package with `kernels.get_local_kernel`."""
    try:
        from kernels import get_local_kernel
    except ImportError:  # the GPU machine may lack the `kernels` library: import the same files directly, loudly
        import importlib.util
        import sys
        path = KERNEL_DIR / "build" / f"torch-{device_type}" / "varlen_attention" / "__init__.py"
        log.warning("the `kernels` library is not installed; importing the %s varlen kernel from %s", device_type, path)
        spec = importlib.util.spec_from_file_location(f"mlmclm_varlen_attention_{device_type}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    return get_local_kernel(KERNEL_DIR, backend=device_type)


def _document_layout(attention_mask, document_ids, b, t, device):
    """Indices of the real tokens (flattened B*T) and cu_seqlens of their documents, in order."""
    valid = torch.ones(b, t, dtype=torch.bool, device=device) if attention_mask is None else attention_mask.bool()
    doc = torch.zeros(b, t, dtype=torch.long, device=device) if document_ids is None else document_ids.long()
    # A new document starts at every row start and wherever the document id changes.
    starts = torch.ones(b, t, dtype=torch.bool, device=device)
    starts[:, 1:] = doc[:, 1:] != doc[:, :-1]
    idx = valid.reshape(-1).nonzero().squeeze(1)
    flat_starts = starts.reshape(-1)[idx]
    flat_starts[0:1] = True
    # a real token also starts a document when the previous real token is not its neighbour (padding in between)
    flat_starts[1:] |= (idx[1:] - idx[:-1]) != 1
    boundaries = flat_starts.nonzero().squeeze(1)
    cu = torch.cat([boundaries, torch.tensor([idx.numel()], device=device)]).to(torch.int32)
    max_len = int((cu[1:] - cu[:-1]).max())
    return idx, cu, max_len


def _kernels(q, k, v, is_causal, attention_mask, document_ids, scale):
    b, h, t, d = q.shape
    kernel = load_kernel(q.device.type)
    idx, cu, max_len = _document_layout(attention_mask, document_ids, b, t, q.device)

    def pack(x):  # (B, heads, T, D) -> (N, heads, D)
        return x.transpose(1, 2).reshape(b * t, x.shape[1], d)[idx]

    out = kernel.varlen_attention(pack(q), pack(k), pack(v), cu, max_len, causal=is_causal, softmax_scale=scale)
    full = q.new_zeros(b * t, h, d).index_put((idx,), out)
    return full.reshape(b, t, h, d).transpose(1, 2)


def _flex(q, k, v, is_causal, attention_mask, document_ids, scale):
    from torch.nn.attention.flex_attention import create_block_mask

    b, _, t, _ = q.shape
    valid = attention_mask.bool() if attention_mask is not None else None

    def mask_mod(bi, hi, qi, ki):
        ok = qi == qi
        if is_causal:
            ok = ok & (ki <= qi)
        if valid is not None:
            ok = ok & (valid[bi, ki] | (qi == ki))
        if document_ids is not None:
            ok = ok & (document_ids[bi, qi] == document_ids[bi, ki])
        return ok

    block_mask = create_block_mask(mask_mod, b, None, t, t, device=q.device)
    return _compiled_flex()(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


@lru_cache(maxsize=1)
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention
    return torch.compile(flex_attention, dynamic=False)
