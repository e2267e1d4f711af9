"""Training FLOPs, counted by one function (`flops_per_token`) under one of three named rules (`RULES`). Standard
library only, so `mlmclm.analysis` imports it without torch (it lives at the top level: anything under
`mlmclm.models` runs `mlmclm/models/__init__.py`, which imports transformers and torch).

The count is Hoffmann et al. (2022, "Chinchilla", App. F): 2 FLOPs per multiply-add in the forward pass,
backward = 2 x forward, so 6 a training token for each weight the token meets, plus the attention scores, which
grow with the context. Adapted to this architecture: grouped-query attention (K and V project to `kv_heads` x
`head_dim`, not `d_model`) and a SwiGLU MLP (three d_model x ffn matrices). The terms of a shape (`terms`), with
q = heads x head_dim, kv = kv_heads x head_dim and the context T = seq_len:

    body        layers x (d q + 2 d kv + q d + 3 d ffn)   weights: Q, K, V and O projections, SwiGLU
    norms       2 d layers + d                            weights: the RMSNorms (two a layer, the final one)
    embedding   vocab x d                                 weights: the input embedding, the output layer each
    attention   layers x 2 x 2 x q x T                    forward FLOPs a token: QK^T and the weighted sum AV
    softmax     layers x 3 x heads x T                    forward FLOPs a token: 3 per attention score and head

A token's forward FLOPs are 2 x the weights it meets (body; norms; the input embedding, counted as a vocab x d
matmul; the output layer on `output_fraction` of the tokens) plus the attention terms. Attention is counted at full
context T even for causal attention (no halving), as in App. F, so causal and bidirectional attention count the same
and objectives differ in the output layer only. Training = 3 x forward.

The output layer and MLM: the model's losses send only the labelled positions through the output layer (the sparse
head, `_sparse_loss` in `mlmclm.models.modeling`), so a step counts the output matmul on `output_fraction` of its
tokens: the mask ratio for MLM (a 40% MLM step computes 40% of CLM's logits), (T - 1) / T or 1 for CLM; 1 counts it
densely, for every token. A schedule of several objectives sums its steps at their fractions
(`mlmclm.schedule.Schedule.output_fractions`: a mixed step at its rows' mean fraction, an alternating phase and a
masking-ratio ramp step by step; `schedule_flops`).

The rules (`RULES`: the terms each counts) and their callers:

- "model": body, norms, attention and the output layer, no input embedding (a lookup) and no softmax: "6 x the
  body's parameters" as `MlmClmConfig.num_parameters_by_part` counts them, norms included, plus attention.
  `MlmClmConfig.flops_per_token` (`mlmclm model info`) and `mlmclm.sizes.flops_per_token` (the study plan's compute
  estimate, dense output layer), `bench mfu` (`mlmclm.bench.bench_mfu`, model FLOPs utilisation: output_fraction =
  the measured fraction of labelled positions).
- "App. F": App. F as printed, on Table 1's shapes (Fig. 10, the paper's sizes: `mlmclm.analysis.loading.compute`): the
  input embedding and the softmax counted, the norms not.
- "6N": 6 x tokens x (V d + body + f V d) on a run folder's parameter counts (Fig. 10, our scales): the input
  embedding, the body's parameters (its count includes the norms) and the output layer; the folder records no layer
  count, so no attention-score or softmax term.

With integer arguments every count is exact (Python ints). A float `output_fraction` makes the result a float.
"""

from __future__ import annotations

# The terms each rule counts (the module docstring says who uses which)
RULES = {
    "model": ("body", "norms", "attention", "output"),
    "App. F": ("embedding", "body", "attention", "softmax", "output"),
    "6N": ("embedding", "body", "output"),
}


def terms(*, layers: int, d_model: int, ffn: int, heads: int, kv_heads: int, vocab: int = 0, seq_len: int = 0,
          head_dim: int | None = None) -> dict:
    """The counts of a shape that `flops_per_token` takes: `body` (the weights of a token's matmuls in the
    transformer body), `norms` (its RMSNorm weights), `embedding` (vocab x d, the input embedding and the output layer
    each), `attention` (forward FLOPs a token of the attention scores at context `seq_len`) and `softmax` (of their
    softmax)."""
    hd = d_model // heads if head_dim is None else head_dim
    q, kv = heads * hd, kv_heads * hd
    return {"body": layers * (d_model * q + 2 * d_model * kv + q * d_model + 3 * d_model * ffn),
            "norms": layers * 2 * d_model + d_model, "embedding": vocab * d_model,
            "attention": layers * 2 * 2 * q * seq_len, "softmax": layers * 3 * heads * seq_len}


def flops_per_token(rule: str, *, body: int, embedding: int, norms: int = 0, attention: int = 0, softmax: int = 0,
                    output_fraction: float = 1, training: bool = True):
    """FLOPs a token (x3 when `training`) by `rule` (a key of `RULES`) of a model of these counts (`terms`, or a run
    folder's: `body` with its norms, `embedding`), the output layer on `output_fraction` of the tokens; an int when
    every argument is one. The one FLOPs count of the package: see the module docstring."""
    if rule not in RULES:
        raise ValueError(f"unknown FLOPs rule {rule!r}; choose one of {', '.join(RULES)}")
    counted = RULES[rule]
    forward = 2 * body
    if "norms" in counted:
        forward += 2 * norms
    if "embedding" in counted:
        forward += 2 * embedding
    if "attention" in counted:
        forward += attention
    if "softmax" in counted:
        forward += softmax
    if "output" in counted:
        forward += output_fraction * 2 * embedding
    return forward * (3 if training else 1)


def schedule_flops(fractions, rule: str, tokens_per_step: int, **counts) -> float:
    """Training FLOPs of a schedule: for each output-layer fraction, its steps x `tokens_per_step` x
    `flops_per_token` at that fraction. `fractions`: {output_fraction: steps}, as `Schedule.output_fractions` counts
    them; `counts`: the other arguments of `flops_per_token` (`terms`)."""
    return sum(n * tokens_per_step * flops_per_token(rule, output_fraction=f, **counts) for f, n in fractions.items())


def body_parameters(*, layers: int, d_model: int, ffn: int, heads: int, kv_heads: int,
                    head_dim: int | None = None) -> int:
    """The transformer body's parameters: per layer the Q/K/V/O projections, the SwiGLU MLP and two RMSNorms, plus
    the final RMSNorm (no embeddings, no output layer): the N of "tokens per parameter"."""
    t = terms(layers=layers, d_model=d_model, ffn=ffn, heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    return t["body"] + t["norms"]
