"""Variable-length (document-masked) attention, CPU variant.

Input is packed: every real token of a batch, documents back to back, with `cu_seqlens` marking where each document
starts (as flash-attention's varlen API). Documents are re-padded into a (documents, max_seqlen) block, so the work is
sum over documents of len^2 (a packed batch of many short documents costs far less than one dense T x T mask), and
attention is computed there with an explicit max-subtracted softmax. Autograd provides the backward pass.
"""

import math

import torch

__all__ = ["varlen_attention"]


def varlen_attention(q, k, v, cu_seqlens, max_seqlen, causal=False, softmax_scale=None):
    """q: (N, H, D); k, v: (N, Hkv, D), H a multiple of Hkv; cu_seqlens: (docs + 1,) int; returns (N, H, D)."""
    n, h, d = q.shape
    hkv = k.shape[1]
    scale = 1.0 / math.sqrt(d) if softmax_scale is None else softmax_scale
    cu = cu_seqlens.to(device=q.device, dtype=torch.long)
    lengths = cu[1:] - cu[:-1]
    docs = lengths.numel()
    doc_of = torch.repeat_interleave(torch.arange(docs, device=q.device), lengths)  # (N,)
    pos_in_doc = torch.arange(n, device=q.device) - cu[doc_of]

    def repad(x):  # (N, heads, D) -> (docs, heads, L, D)
        out = x.new_zeros(docs, max_seqlen, x.shape[1], d)
        out = out.index_put((doc_of, pos_in_doc), x)
        return out.transpose(1, 2)

    qp = repad(q).reshape(docs, hkv, h // hkv, max_seqlen, d)  # query heads grouped by their KV head
    kp, vp = repad(k).unsqueeze(2), repad(v).unsqueeze(2)       # (docs, Hkv, 1, L, D)
    scores = torch.matmul(qp, kp.transpose(-1, -2)) * scale     # (docs, Hkv, G, L, L)
    ar = torch.arange(max_seqlen, device=q.device)
    allowed = ar[None, :] < lengths[:, None]                    # valid keys per document: (docs, L)
    allowed = allowed[:, None, :].expand(docs, max_seqlen, max_seqlen)
    if causal:
        allowed = allowed & (ar[None, :] <= ar[:, None])
    scores = scores.masked_fill(~allowed[:, None, None], float("-inf"))
    scores = scores - scores.amax(dim=-1, keepdim=True).detach()
    probs = scores.exp()
    probs = probs / probs.sum(dim=-1, keepdim=True)
    out = torch.matmul(probs, vp).reshape(docs, h, max_seqlen, d).transpose(1, 2)  # (docs, L, H, D)
    return out[doc_of, pos_in_doc]
