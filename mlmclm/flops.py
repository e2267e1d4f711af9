"""Training FLOPs, defined once. Standard library only, so `mlmclm.analysis` imports it without torch (it lives at the
top level: anything under `mlmclm.models` runs `mlmclm/models/__init__.py`, which imports transformers and torch).

The rule is Hoffmann et al. (2022, "Chinchilla", App. F) counting: 2 FLOPs per multiply-add in the forward pass,
backward = 2 x forward, so 6N a training token for the N weights a token meets, plus the attention scores, which
grow with the context. Adapted to this architecture: grouped-query attention (K and V project to `kv_heads` x
`head_dim`, not `d_model`) and a SwiGLU MLP (three d_model x ffn matrices). Forward FLOPs a token, with
q = heads x head_dim, kv = kv_heads x head_dim and the context T = seq_len:

    layers x 2 x (d q + 2 d kv + q d + 3 d ffn)    Q, K, V and O projections, SwiGLU
  + layers x 2 x 2 x q x T                        attention scores: QK^T and the weighted sum AV
  + output_fraction x 2 x vocab x d               the output layer (logits)

Attention is counted at full context T even for causal attention (no halving), as in App. F. Training = 3 x forward.

The output layer and MLM: the model's losses send only the labelled positions through the output layer (the sparse
head, `_sparse_loss` in `mlmclm.models.modeling`), so a step counts the output matmul on `output_fraction` of its
tokens: the mask ratio for MLM (a 40% MLM step computes 40% of CLM's logits), (T - 1) / T or 1 for CLM; 1 counts it
densely, for every token.

Three terms the callers count differently today, kept as explicit arguments:

- `embeddings`: the input embedding as a vocab x d matmul (2 x vocab x d a token), as App. F counts it.
- `softmax`: 3 FLOPs per attention score and head for the softmax (3 x heads x T a token and layer), as App. F.
- `norm_weights`: 2 FLOPs per RMSNorm weight (2 x d per layer, 2 x d for the final norm): "6 x the body's
  parameters" as `MlmClmConfig.num_parameters_by_part` counts them, norms included.

The callers:

- `MlmClmConfig.flops_per_token` (`mlmclm model info`, the study plan's compute estimate in `mlmclm.studies`):
  `flops_per_token` with norm_weights, no embeddings or softmax, a dense output layer (output_fraction=1).
- `bench mfu` (`mlmclm.bench.bench_mfu`, model FLOPs utilisation): the same through `MlmClmConfig.flops_per_token`,
  with output_fraction = the measured fraction of labelled positions (about 0.4 for MLM40, (T - 1) / T for CLM).
- `mlmclm.analysis.compute.flops_per_step` (Fig. 10, on Table 1's architecture): `flops_per_step` as App. F,
  embeddings and softmax, no norm weights, output_fraction = the mask ratio for MLM steps, 1.0 for CLM steps.
- `schedule_flops`: a whole schedule, any phases (`mlmclm.schedule.Schedule.output_fractions`): a mixed step
  (`mix1clm15mlm40`) at its rows' mean fraction, an alternating phase step by step. Causal and bidirectional
  attention count the same (full context), so objectives differ in the output layer only.

With integer arguments every count is exact (Python ints). A float `output_fraction` makes the result a float; the
order of the factors of the output-layer term is that each caller has always used, so its numbers do not move.
"""

from __future__ import annotations


def _forward_flops_but_output(*, layers: int, d_model: int, ffn: int, heads: int, kv_heads: int, vocab: int,
                              seq_len: int, head_dim: int | None = None, embeddings: bool = False,
                              softmax: bool = False, norm_weights: bool = True) -> int:
    """Forward FLOPs a token of everything but the output layer (an exact int); see the module docstring."""
    hd = d_model // heads if head_dim is None else head_dim
    q, kv = heads * hd, kv_heads * hd
    weights = d_model * q + 2 * d_model * kv + q * d_model + 3 * d_model * ffn  # one layer's matmul weights
    if norm_weights:
        weights += 2 * d_model  # its two RMSNorms
    per_layer = 2 * weights + 2 * 2 * q * seq_len + (3 * heads * seq_len if softmax else 0)
    flops = layers * per_layer
    if norm_weights:
        flops += 2 * d_model  # the final RMSNorm
    if embeddings:
        flops += 2 * vocab * d_model
    return flops


def flops_per_token(*, layers: int, d_model: int, ffn: int, heads: int, kv_heads: int, vocab: int, seq_len: int,
                    head_dim: int | None = None, output_fraction: float = 1, training: bool = True,
                    embeddings: bool = False, softmax: bool = False, norm_weights: bool = True):
    """FLOPs a token (x3 when `training`) at context `seq_len`; an int when `output_fraction` is one."""
    rest = _forward_flops_but_output(
        layers=layers, d_model=d_model, ffn=ffn, heads=heads, kv_heads=kv_heads, vocab=vocab, seq_len=seq_len,
        head_dim=head_dim, embeddings=embeddings, softmax=softmax, norm_weights=norm_weights)
    return (rest + output_fraction * 2 * vocab * d_model) * (3 if training else 1)


def flops_per_step(*, tokens_per_step: int, layers: int, d_model: int, ffn: int, heads: int, kv_heads: int,
                   vocab: int, seq_len: int, head_dim: int | None = None, output_fraction: float = 1,
                   embeddings: bool = False, softmax: bool = False, norm_weights: bool = True) -> float:
    """Training FLOPs of one step of `tokens_per_step` tokens in sequences of `seq_len`: the forward FLOPs of one
    sequence, x3, x the step's sequences (tokens_per_step / seq_len). Equals tokens_per_step x `flops_per_token`
    (up to float rounding)."""
    rest = _forward_flops_but_output(
        layers=layers, d_model=d_model, ffn=ffn, heads=heads, kv_heads=kv_heads, vocab=vocab, seq_len=seq_len,
        head_dim=head_dim, embeddings=embeddings, softmax=softmax, norm_weights=norm_weights)
    forward = seq_len * rest + output_fraction * 2 * seq_len * d_model * vocab  # one sequence
    return 3 * forward * tokens_per_step / seq_len


def schedule_flops(fractions, **step) -> float:
    """Training FLOPs of a schedule: for each output-layer fraction, its steps x `flops_per_step` at that fraction.
    `fractions`: {output_fraction: steps}, as `Schedule.output_fractions` counts them; `step`: the other arguments
    of `flops_per_step`."""
    return sum(n * flops_per_step(output_fraction=f, **step) for f, n in fractions.items())


def body_parameters(*, layers: int, d_model: int, ffn: int, heads: int, kv_heads: int,
                    head_dim: int | None = None) -> int:
    """The transformer body's parameters: per layer the Q/K/V/O projections, the SwiGLU MLP and two RMSNorms, plus
    the final RMSNorm (no embeddings, no output layer): the N of "tokens per parameter"."""
    hd = d_model // heads if head_dim is None else head_dim
    q, kv = heads * hd, kv_heads * hd
    return layers * (d_model * q + 2 * d_model * kv + q * d_model + 3 * d_model * ffn + 2 * d_model) + d_model
