"""One attention entry point with interchangeable backends.

`attention(q, k, v, is_causal=..., attention_mask=..., document_ids=..., backend=...)` with q: (B, H, T, D) and
k, v: (B, Hkv, T, D) (grouped-query attention when Hkv < H). Query i may attend key j when j is a real token
(attention_mask), both are in the same document (document_ids, when given) and, if causal, j <= i. Outputs at padded
positions are not meaningful (they never reach a real token).

The mask is prepared once per forward: `prepare_mask(...)` returns an `AttentionMask` holding what the backend needs
(the model builds it before its layer loop and passes it to every layer as `attention_mask`); called with a plain
(B, T) padding mask, `attention` prepares one itself.

Backends: `eager` (the reference: matmul + softmax), `sdpa` (torch's scaled_dot_product_attention, the default),
`kernels` (a varlen kernel package shipped in `mlmclm/models/kernels/` in the Hugging Face `kernels` layout, CPU
and CUDA variants) and `flex` (FlexAttention, GPU only).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import torch
import torch.nn.functional as F

from ..errors import ConfigError
from .configuration import ATTENTION_BACKENDS

log = logging.getLogger(__name__)
KERNEL_DIR = Path(str(resources.files("mlmclm.models") / "kernels" / "varlen_attention"))  # package data


def check_backend(backend: str, device: torch.device | str | None = None) -> None:
    """Raise one clear line when `backend` is unknown or cannot run on `device`."""
    if backend not in ATTENTION_BACKENDS:
        raise ConfigError(f"attention backend {backend!r} is unknown; choose one of {', '.join(ATTENTION_BACKENDS)}")
    if backend == "flex" and device is not None and torch.device(device).type == "cpu":
        raise ConfigError("attention backend 'flex' is GPU only (FlexAttention has no backward pass on CPU); "
                         "use 'sdpa' or 'kernels' on CPU")


@dataclass(eq=False)
class AttentionMask:
    """Which (query, key) pairs may attend, prepared once per forward for one backend and shared by every layer (as
    transformers' `LlamaModel.forward` prepares its mask before the layer loop). Build it with `prepare_mask`.

    `attention_mask` is None when there is no padding (the one host sync, done once here instead of once per layer);
    then, without `document_ids`, sdpa takes its `is_causal` fast path. Per backend: eager keeps `disallowed`, sdpa an
    additive bias made from it on first use (per dtype: under autocast q is not in the dtype of the hidden states),
    kernels the document `layout` of the real tokens, flex its `block_mask`.
    """

    backend: str
    is_causal: bool
    attention_mask: torch.Tensor | None  # (B, T), None: no padding
    document_ids: torch.Tensor | None  # (B, T)
    batch: int
    seq_len: int
    device: torch.device
    disallowed: torch.Tensor | None = None  # eager, sdpa: (B or 1, 1, T, T) bool, True where attention is forbidden
    layout: tuple | None = None  # kernels: (idx (N,), cu_seqlens (n_docs + 1,), max_len)
    block_mask: object = None  # flex: BlockMask
    _bias: dict = field(default_factory=dict)  # sdpa: dtype -> (B or 1, 1, T, T) additive bias

    @property
    def dense(self) -> bool:
        """Neither padding nor documents: every query may attend every key (causal or not)."""
        return self.attention_mask is None and self.document_ids is None

    def sdpa_bias(self, dtype: torch.dtype) -> torch.Tensor:
        if dtype not in self._bias:
            self._bias[dtype] = torch.zeros((), dtype=dtype, device=self.device).masked_fill(self.disallowed,
                                                                                           float("-inf"))
        return self._bias[dtype]

    def to(self, device, non_blocking: bool = False) -> "AttentionMask":
        """The same mask prepared on `device` (accelerate moves layer inputs with `.to` under a device map)."""
        device = torch.device(device)
        if device == self.device:
            return self
        move = lambda x: None if x is None else x.to(device, non_blocking=non_blocking)  # noqa: E731
        return prepare_mask(move(self.attention_mask), move(self.document_ids), is_causal=self.is_causal,
                            backend=self.backend, batch=self.batch, seq_len=self.seq_len, device=device)


def prepare_mask(attention_mask=None, document_ids=None, *, is_causal: bool, backend: str, batch: int, seq_len: int,
                 device) -> AttentionMask:
    """What `backend` needs to mask attention over (B, T) = (batch, seq_len) inputs, built once (see AttentionMask)."""
    device = torch.device(device)
    check_backend(backend, device)
    if attention_mask is not None and bool(attention_mask.all()):  # host sync (once per forward): padding at all?
        attention_mask = None
    mask = AttentionMask(backend, is_causal, attention_mask, document_ids, batch, seq_len, device)
    if backend == "kernels":
        mask.layout = _document_layout(attention_mask, document_ids, batch, seq_len, device)
    elif backend == "flex":
        mask.block_mask = _block_mask(is_causal, attention_mask, document_ids, batch, seq_len, device)
    elif backend == "eager" or not mask.dense:
        mask.disallowed = ~allowed_mask(seq_len, is_causal, attention_mask, document_ids, device)
    return mask


def attention(q, k, v, *, is_causal: bool, attention_mask=None, document_ids=None, backend: str = "sdpa",
              scale: float | None = None):
    """(B, H, T, D) attention output. `attention_mask` is a (B, T) padding mask (1: real token), or an
    `AttentionMask` from `prepare_mask` (the model prepares one per forward for all its layers): then it carries
    `document_ids` and must have been prepared for this `backend` and `is_causal`."""
    if isinstance(attention_mask, AttentionMask):
        mask = attention_mask
        if mask.backend != backend or mask.is_causal != is_causal or document_ids is not None:
            raise ValueError(f"this AttentionMask was prepared for backend={mask.backend!r}, "
                             f"is_causal={mask.is_causal} and carries its document_ids; got backend={backend!r}, "
                             f"is_causal={is_causal}" + (", document_ids" if document_ids is not None else ""))
    else:
        mask = prepare_mask(attention_mask, document_ids, is_causal=is_causal, backend=backend, batch=q.shape[0],
                            seq_len=q.shape[2], device=q.device)
    if backend == "kernels":
        return _kernels(q, k, v, mask, scale)
    if backend == "flex":
        return _flex(q, k, v, mask, scale)
    if backend == "sdpa":
        if mask.dense:
            return F.scaled_dot_product_attention(q, k, v, is_causal=mask.is_causal, scale=scale,
                                                  enable_gqa=q.shape[1] != k.shape[1])
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.sdpa_bias(q.dtype), scale=scale,
                                              enable_gqa=q.shape[1] != k.shape[1])
    return _eager(q, k, v, mask.disallowed, scale)


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


def _eager(q, k, v, disallowed, scale):
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)  # (B, H, T, D)
    scores = torch.matmul(q, k.transpose(-1, -2)) * (scale or 1.0 / math.sqrt(q.shape[-1]))  # (B, H, T, T)
    scores = scores.masked_fill(disallowed, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype), v)  # (B, H, T, D)


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
    idx = valid.reshape(-1).nonzero().squeeze(1)  # host sync (nonzero's size): once per forward
    flat_starts = starts.reshape(-1)[idx]
    flat_starts[0:1] = True
    # a real token also starts a document when the previous real token is not its neighbour (padding in between)
    flat_starts[1:] |= (idx[1:] - idx[:-1]) != 1
    boundaries = flat_starts.nonzero().squeeze(1)  # host sync (nonzero's size): once per forward
    cu = torch.cat([boundaries, torch.tensor([idx.numel()], device=device)]).to(torch.int32)
    max_len = int((cu[1:] - cu[:-1]).max())  # host sync: once per forward
    return idx, cu, max_len


def _kernels(q, k, v, mask, scale):
    b, h, t, d = q.shape
    kernel = load_kernel(q.device.type)
    idx, cu, max_len = mask.layout

    def pack(x):  # (B, heads, T, D) -> (N, heads, D)
        return x.transpose(1, 2).reshape(b * t, x.shape[1], d)[idx]

    out = kernel.varlen_attention(pack(q), pack(k), pack(v), cu, max_len, causal=mask.is_causal,
                                  softmax_scale=scale)  # (N, H, D)
    full = q.new_zeros(b * t, h, d).index_put((idx,), out)  # (B*T, H, D), zeros at padding
    return full.reshape(b, t, h, d).transpose(1, 2)  # (B, H, T, D)


def _block_mask(is_causal, attention_mask, document_ids, b, t, device):
    from torch.nn.attention.flex_attention import create_block_mask

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

    return create_block_mask(mask_mod, b, None, t, t, device=device)


def _flex(q, k, v, mask, scale):
    return _compiled_flex()(q, k, v, block_mask=mask.block_mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


@lru_cache(maxsize=1)
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention
    return torch.compile(flex_attention, dynamic=False)
