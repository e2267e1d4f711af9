"""The named model sizes (Table 1 of the paper, and the small ones of the scales), torch-free: shapes only, in
`MlmClmConfig`'s field names (`mlmclm.models.configuration` builds configs from them; `mlmclm study plan` counts
their FLOPs without importing torch), and the checks of a shape that `MlmClmConfig` and a run's config
(`config.ModelSpec`) both make.
"""

from __future__ import annotations

from . import flops
from .errors import ConfigError

ATTENTION_BACKENDS = ("sdpa", "eager", "kernels", "flex")
# `MlmClmConfig`'s fields, in its signature's order (tests/test_config.py checks that they agree)
FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta",
          "initializer_range", "tie_word_embeddings", "is_causal", "attention_backend", "hidden_act", "bos_token_id",
          "eos_token_id", "pad_token_id", "mask_token_id")

# Table 1 of the paper (210m/610m/1b), plus the small sizes the CPU/GPU scales use. Shapes only: vocabulary and
# special tokens come from the tokenizer of the run (the paper: Llama-3, 128,256 tokens, mask id 128002).
_LLAMA3 = dict(
    vocab_size=128_256, max_position_embeddings=2048, bos_token_id=128_000, eos_token_id=128_001,
    pad_token_id=128_001, mask_token_id=128_002,
)
SIZES: dict[str, dict] = {
    "210m": dict(num_hidden_layers=12, hidden_size=768, intermediate_size=3072, num_attention_heads=12,
                 num_key_value_heads=12, **_LLAMA3),
    "610m": dict(num_hidden_layers=26, hidden_size=1152, intermediate_size=4096, num_attention_heads=18,
                 num_key_value_heads=6, **_LLAMA3),
    "1b": dict(num_hidden_layers=28, hidden_size=1728, intermediate_size=5120, num_attention_heads=18,
               num_key_value_heads=6, **_LLAMA3),
    # Scale sizes (vocabulary of the locally trained tokenizer; the scale's data config may override it).
    "tiny": dict(num_hidden_layers=2, hidden_size=64, intermediate_size=192, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=2048, max_position_embeddings=256),
    "tiny-s": dict(num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                   num_key_value_heads=1, vocab_size=512, max_position_embeddings=128),
    "tiny-m": dict(num_hidden_layers=2, hidden_size=48, intermediate_size=128, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=512, max_position_embeddings=128),
    "tiny-l": dict(num_hidden_layers=2, hidden_size=64, intermediate_size=192, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=512, max_position_embeddings=128),
    "mini-xs": dict(num_hidden_layers=4, hidden_size=64, intermediate_size=176, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=8192, max_position_embeddings=512),
    "mini-s": dict(num_hidden_layers=4, hidden_size=96, intermediate_size=256, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=8192, max_position_embeddings=512),
    "mini-m": dict(num_hidden_layers=5, hidden_size=128, intermediate_size=352, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=8192, max_position_embeddings=512),
    "mini-l": dict(num_hidden_layers=5, hidden_size=192, intermediate_size=512, num_attention_heads=6,
                   num_key_value_heads=2, vocab_size=8192, max_position_embeddings=512),
    # The twin of the paper's 610M (scale `twin`, issue 45): its parameter shares by a 1,024-token vocabulary at width
    # 64: body 203,328 (60.8%; the 610M's 60.9%), input embedding and untied output head 65,536 each (19.6%; 19.55%)
    "twin": dict(num_hidden_layers=4, hidden_size=64, intermediate_size=200, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=1024, max_position_embeddings=512),
    "small-s": dict(num_hidden_layers=6, hidden_size=384, intermediate_size=1024, num_attention_heads=6,
                    num_key_value_heads=2, vocab_size=16384, max_position_embeddings=1024),
    "small-m": dict(num_hidden_layers=8, hidden_size=512, intermediate_size=1408, num_attention_heads=8,
                    num_key_value_heads=4, vocab_size=16384, max_position_embeddings=1024),
    "small-l": dict(num_hidden_layers=12, hidden_size=640, intermediate_size=1792, num_attention_heads=10,
                    num_key_value_heads=5, vocab_size=16384, max_position_embeddings=1024),
    # A decoder of the LLM ecosystem that the CPT study continues (scales' `cpt_decoders`; its weights come from the
    # decoder itself, this shape is for the plan's accounting): SmolLM2-135M, a mask token added to its 49,152
    "smollm2-135m": dict(num_hidden_layers=30, hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49_153, max_position_embeddings=8192, rope_theta=100_000.0,
                         tie_word_embeddings=True),
}



def flops_per_token(shape: dict, seq_len: int, training: bool = True, output_fraction: float = 1):
    """FLOPs a token of a model of `shape` (a `SIZES` entry, or an `MlmClmConfig`'s fields) at context `seq_len`:
    `mlmclm.flops.flops_per_token` under its "model" rule (norm weights, no embeddings or softmax), the output layer
    on `output_fraction` of the tokens."""
    counts = flops.terms(
        layers=shape["num_hidden_layers"], d_model=shape["hidden_size"], ffn=shape["intermediate_size"],
        heads=shape["num_attention_heads"], kv_heads=shape.get("num_key_value_heads") or shape["num_attention_heads"],
        head_dim=shape.get("head_dim"), vocab=shape["vocab_size"], seq_len=seq_len)
    return flops.flops_per_token("model", **counts, output_fraction=output_fraction, training=training)


def shape(name: str, **overrides) -> dict:
    """The fields of the named size with `overrides`, checked (`check_shape`)."""
    if name not in SIZES:
        raise ConfigError(f"unknown model size {name!r}; choose one of {', '.join(SIZES)}")
    out = {**SIZES[name], **overrides}
    check_shape(out)
    return out


def check_shape(fields: dict) -> None:
    """Positive sizes, heads that divide the width (unless `head_dim` is given) and are a multiple of the key-value
    heads, an even head size (rotary embeddings), a numeric rope_theta, a known attention backend. `fields`: a
    shape's fields (`num_key_value_heads` None or absent: one a head; `head_dim` None or absent: width / heads)."""
    if fields.get("num_key_value_heads") is None:
        fields = {**fields, "num_key_value_heads": fields.get("num_attention_heads")}
    for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "max_position_embeddings"):
        v = fields.get(name)
        if not isinstance(v, int) or v <= 0:
            raise ConfigError(f"MlmClmConfig.{name} must be a positive integer, got {v!r}")
    h, n, kv, head_dim = (fields["hidden_size"], fields["num_attention_heads"], fields["num_key_value_heads"],
                          fields.get("head_dim"))
    if head_dim is None and h % n:
        raise ConfigError(
            f"MlmClmConfig.hidden_size ({h}) must be divisible by num_attention_heads ({n}), or set head_dim")
    if n % kv:
        raise ConfigError(f"MlmClmConfig.num_attention_heads ({n}) must be divisible by num_key_value_heads ({kv})")
    hd = h // n if head_dim is None else head_dim
    if hd % 2:
        raise ConfigError(f"MlmClmConfig.head_dim ({hd}) must be even for rotary embeddings")
    try:
        float(fields.get("rope_theta", 0.0))
    except (TypeError, ValueError):
        raise ConfigError(f"MlmClmConfig.rope_theta must be a number, got {fields['rope_theta']!r}") from None
    backend = fields.get("attention_backend", "sdpa")
    if backend not in ATTENTION_BACKENDS:
        raise ConfigError(f"MlmClmConfig.attention_backend={backend!r} is unknown; "
                          f"choose one of {', '.join(ATTENTION_BACKENDS)}")
