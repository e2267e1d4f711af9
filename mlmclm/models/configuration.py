"""The model's configuration: one transformers config for every objective, and the named sizes.

MLM and CLM models share this config (Ettin-style): whether attention is causal is a per-call choice, and
`is_causal` here is only the default used when a forward call does not say.
"""

from __future__ import annotations

from transformers import PretrainedConfig

from .. import flops
from ..errors import ConfigError

ATTENTION_BACKENDS = ("sdpa", "eager", "kernels", "flex")

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


class MlmClmConfig(PretrainedConfig):
    """Llama/EuroBERT-style transformer: RMSNorm, SwiGLU, RoPE, grouped-query attention, no biases.

    Field names follow transformers' Llama/EuroBert conventions. `is_causal` is the default attention direction of
    a forward call; `attention_backend` is one of `ATTENTION_BACKENDS`.
    """

    model_type = "mlmclm"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(
        self,
        vocab_size: int = 128_256,
        hidden_size: int = 768,
        intermediate_size: int = 3072,
        num_hidden_layers: int = 12,
        num_attention_heads: int = 12,
        num_key_value_heads: int | None = None,
        head_dim: int | None = None,
        max_position_embeddings: int = 2048,
        rms_norm_eps: float = 1e-5,
        rope_theta: float = 10_000.0,
        initializer_range: float = 0.02,
        tie_word_embeddings: bool = False,
        is_causal: bool = False,
        attention_backend: str = "sdpa",
        hidden_act: str = "silu",
        bos_token_id: int | None = None,
        eos_token_id: int | None = None,
        pad_token_id: int | None = None,
        mask_token_id: int | None = None,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_attention_heads if num_key_value_heads is None else num_key_value_heads
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = float(rope_theta)
        self.initializer_range = initializer_range
        self.is_causal = bool(is_causal)
        self.attention_backend = attention_backend
        self.hidden_act = hidden_act
        self.mask_token_id = mask_token_id
        self._validate_shape(head_dim)
        self.head_dim = hidden_size // num_attention_heads if head_dim is None else head_dim
        super().__init__(
            bos_token_id=bos_token_id, eos_token_id=eos_token_id, pad_token_id=pad_token_id,
            tie_word_embeddings=tie_word_embeddings, **kwargs,
        )
        # Some transformers versions reset this attribute in the base __init__; ours must survive.
        self.tie_word_embeddings = tie_word_embeddings

    def _validate_shape(self, head_dim):
        h, n, kv = self.hidden_size, self.num_attention_heads, self.num_key_value_heads
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "max_position_embeddings"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise ConfigError(f"MlmClmConfig.{name} must be a positive integer, got {v!r}")
        if head_dim is None and h % n:
            raise ConfigError(
                f"MlmClmConfig.hidden_size ({h}) must be divisible by num_attention_heads ({n}), or set head_dim")
        if n % kv:
            raise ConfigError(
                f"MlmClmConfig.num_attention_heads ({n}) must be divisible by num_key_value_heads ({kv})")
        hd = h // n if head_dim is None else head_dim
        if hd % 2:
            raise ConfigError(f"MlmClmConfig.head_dim ({hd}) must be even for rotary embeddings")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ConfigError(f"MlmClmConfig.attention_backend={self.attention_backend!r} is unknown; "
                             f"choose one of {', '.join(ATTENTION_BACKENDS)}")

    @classmethod
    def from_size(cls, name: str, **overrides) -> "MlmClmConfig":
        """The named shape (`"210m"`, `"610m"`, `"1b"` as Table 1; `"tiny"`, `"mini-*"`, `"small-*"` for the scales)."""
        if name not in SIZES:
            raise ConfigError(f"unknown model size {name!r}; choose one of {', '.join(SIZES)}")
        return cls(**{**SIZES[name], **overrides})

    # ---- introspection (no weights are allocated) ----
    def num_parameters_by_part(self) -> dict[str, int]:
        """Parameter counts: input embeddings, transformer body, output layer (0 when tied), total."""
        d, v = self.hidden_size, self.vocab_size
        body = flops.body_parameters(layers=self.num_hidden_layers, d_model=d, ffn=self.intermediate_size,
                                     heads=self.num_attention_heads, kv_heads=self.num_key_value_heads,
                                     head_dim=self.head_dim)
        head = 0 if self.tie_word_embeddings else v * d
        return {"embeddings": v * d, "body": body, "output_layer": head, "total": v * d + body + head}

    def flops_per_token(self, seq_len: int | None = None, training: bool = True, output_fraction: float = 1):
        """Matmul FLOPs a token: 2 x (body + output-layer weights) + attention scores (QK^T and AV), forward only;
        x3 when training (backward = 2x forward). Attention is counted for full (bidirectional) `seq_len` context.
        The output matmul runs whether tied or not, on `output_fraction` of the tokens (1: dense, an exact int;
        `bench mfu` passes the fraction of labelled positions). The rule: `mlmclm.flops` (norm weights counted, no
        embeddings or softmax)."""
        t = self.max_position_embeddings if seq_len is None else seq_len
        return flops.flops_per_token(
            layers=self.num_hidden_layers, d_model=self.hidden_size, ffn=self.intermediate_size,
            heads=self.num_attention_heads, kv_heads=self.num_key_value_heads, head_dim=self.head_dim,
            vocab=self.vocab_size, seq_len=t, output_fraction=output_fraction, training=training,
            embeddings=False, softmax=False, norm_weights=True)
