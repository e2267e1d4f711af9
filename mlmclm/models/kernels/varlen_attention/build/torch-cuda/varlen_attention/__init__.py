"""Variable-length (document-masked) attention, CUDA variant: FlexAttention (a fused Triton kernel) over the packed
tokens with a block-sparse document mask, so no dense T x T mask exists and blocks across documents are skipped."""

import math

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

__all__ = ["varlen_attention"]

_flex = torch.compile(flex_attention, dynamic=False)


def varlen_attention(q, k, v, cu_seqlens, max_seqlen, causal=False, softmax_scale=None):
    """q: (N, H, D); k, v: (N, Hkv, D), H a multiple of Hkv; cu_seqlens: (docs + 1,) int; returns (N, H, D)."""
    n, h, d = q.shape
    scale = 1.0 / math.sqrt(d) if softmax_scale is None else softmax_scale
    cu = cu_seqlens.to(device=q.device, dtype=torch.long)
    doc = torch.repeat_interleave(torch.arange(cu.numel() - 1, device=q.device), cu[1:] - cu[:-1])

    def mask_mod(b, hh, qi, ki):
        same = doc[qi] == doc[ki]
        return (same & (ki <= qi)) if causal else same

    block_mask = create_block_mask(mask_mod, None, None, n, n, device=q.device)
    out = _flex(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                block_mask=block_mask, scale=scale, enable_gqa=h != k.shape[1])
    return out[0].transpose(0, 1)
