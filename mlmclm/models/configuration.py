"""The model's configuration: one transformers config for every objective, of the named sizes (`mlmclm.sizes`).

MLM and CLM models share this config (Ettin-style): whether attention is causal is a per-call choice, and
`is_causal` here is only the default used when a forward call does not say.

Attention, the one place where the two conventions meet: `attention_backend` (one of `ATTENTION_BACKENDS`: "sdpa",
"eager", "kernels", "flex") is what the model runs and what a run records. transformers' own `attn_implementation` is
honoured where a caller passes it, under transformers' names of the same backends (`HF_ATTN_IMPLEMENTATION`: "sdpa",
"eager", "flex_attention"; "kernels" has none): `MlmClmConfig(..., attn_implementation=...)`,
`from_pretrained(..., attn_implementation="eager")` and `model.set_attn_implementation("sdpa")` set
`attention_backend`, and where one is given it wins over a saved config's backend (`from_pretrained(...,
attention_backend="kernels")` picks ours by our name). Without one, a loaded model keeps its saved backend, and
transformers' record `config._attn_implementation` names it (for "kernels" it keeps transformers' default, which this
model does not read). `hf_attn_implementation` maps the other way, to open a transformers encoder under one of our
backends (`mlmclm.evaluation.checkpoint`).
"""

from __future__ import annotations

from transformers import PretrainedConfig

from .. import flops, sizes
from ..errors import ConfigError
from ..sizes import ATTENTION_BACKENDS  # noqa: F401  (models.attention and the cli read it here)

# transformers' `attn_implementation` name of each backend that it has too ("kernels" is ours only)
HF_ATTN_IMPLEMENTATION = {"sdpa": "sdpa", "eager": "eager", "flex": "flex_attention"}


def attention_backend_of(attn_implementation: str) -> str:
    """The `attention_backend` that transformers' `attn_implementation` name means."""
    backends = {hf: ours for ours, hf in HF_ATTN_IMPLEMENTATION.items()}
    if attn_implementation not in backends:
        raise ConfigError(f"attn_implementation={attn_implementation!r} has no mlmclm attention backend; choose one "
                          f"of {', '.join(backends)} (or attention_backend=, one of {', '.join(ATTENTION_BACKENDS)})")
    return backends[attn_implementation]


def hf_attn_implementation(backend: str) -> str:
    """transformers' `attn_implementation` name of the attention backend `backend` (for a transformers model)."""
    if backend not in HF_ATTN_IMPLEMENTATION:
        raise ConfigError(f"attention backend {backend!r} has no transformers attn_implementation; choose one of "
                          f"{', '.join(HF_ATTN_IMPLEMENTATION)} for a transformers model")
    return HF_ATTN_IMPLEMENTATION[backend]


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

    @property
    def _attn_implementation(self):
        return self._attn_implementation_internal

    @_attn_implementation.setter
    def _attn_implementation(self, value):
        """transformers sets this where a caller passes `attn_implementation`: it sets `attention_backend` too (the
        module docstring)."""
        PretrainedConfig._attn_implementation.fset(self, value)
        if self._attn_implementation_internal is not None:
            self.attention_backend = attention_backend_of(self._attn_implementation_internal)

    def _validate_shape(self, head_dim):
        sizes.check_shape({**vars(self), "head_dim": head_dim})

    @classmethod
    def from_size(cls, name: str, **overrides) -> "MlmClmConfig":
        """The named shape (`"210m"`, `"610m"`, `"1b"` as Table 1; `"tiny"`, `"mini-*"`, `"small-*"` for the scales)."""
        return cls(**sizes.shape(name, **overrides))

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
        `bench mfu` passes the fraction of labelled positions). Counted by `mlmclm.flops.flops_per_token`, its "model"
        rule (norm weights counted, no embeddings or softmax)."""
        t = self.max_position_embeddings if seq_len is None else seq_len
        return sizes.flops_per_token(vars(self), t, training, output_fraction)
