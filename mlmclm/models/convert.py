"""Conversion to and from transformers' own Llama (decoder) and EuroBert (encoder) classes.

All three share one weight layout (`model.embed_tokens`, `model.layers.N.{self_attn,mlp}.*`, `model.norm`,
`lm_head`), so conversion is a config translation plus a state-dict copy. A converted checkpoint loads anywhere with
plain transformers and no remote code; a Llama-family decoder from the LLM ecosystem can be continued with MLM.
"""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, EuroBertConfig, LlamaConfig, PreTrainedModel

from ..errors import ConfigError, ConversionError
from .configuration import MlmClmConfig
from .modeling import MlmClmForCausalLM, MlmClmForMaskedLM, MlmClmModel

_SHARED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
           "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "initializer_range",
           "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id")


def _rope_theta(config) -> float:
    params = getattr(config, "rope_parameters", None) or {}
    scaling = params.get("rope_type", "default") if isinstance(params, dict) else "default"
    if scaling not in ("default", None):
        raise ConversionError(f"RoPE type {scaling!r} of {type(config).__name__} is not supported; only default RoPE")
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    return float(theta if theta is not None else getattr(config, "rope_theta", 10_000.0))


def config_from_hf(hf_config) -> MlmClmConfig:
    """MlmClmConfig of a transformers Llama or EuroBert config (biases, dropout and MLP variants must be default)."""
    for name in ("attention_bias", "mlp_bias"):
        if getattr(hf_config, name, False):
            raise ConversionError(f"{type(hf_config).__name__}.{name}=True is not supported: mlmclm models have no biases")
    if getattr(hf_config, "hidden_act", "silu") != "silu":
        raise ConversionError(f"{type(hf_config).__name__}.hidden_act={hf_config.hidden_act!r}: only 'silu' (SwiGLU)")
    is_encoder = isinstance(hf_config, EuroBertConfig)
    kwargs = {k: getattr(hf_config, k) for k in _SHARED if getattr(hf_config, k, None) is not None}
    return MlmClmConfig(**kwargs, rope_theta=_rope_theta(hf_config), is_causal=not is_encoder,
                        mask_token_id=getattr(hf_config, "mask_token_id", None))


def from_hf(model: PreTrainedModel):
    """The mlmclm model matching a transformers `LlamaForCausalLM`/`LlamaModel` (-> `MlmClmForCausalLM`/
    `MlmClmModel`) or `EuroBertForMaskedLM`/`EuroBertModel` (-> `MlmClmForMaskedLM`/`MlmClmModel`), same weights."""
    name = type(model).__name__
    targets = {"LlamaForCausalLM": MlmClmForCausalLM, "LlamaModel": MlmClmModel,
               "EuroBertForMaskedLM": MlmClmForMaskedLM, "EuroBertModel": MlmClmModel}
    if name not in targets:
        raise ConversionError(f"from_hf: cannot convert {name}; supported: {', '.join(targets)}")
    config = config_from_hf(model.config)
    target = targets[name]
    with torch.device("meta"):
        ours = target(config)
    state = model.state_dict()
    ours.load_state_dict(state, strict=True, assign=True)
    if config.tie_word_embeddings and hasattr(ours, "lm_head"):
        ours.tie_weights()
    return ours.train(model.training)


def to_hf(model: PreTrainedModel, kind: str):
    """A transformers model with the same weights: `kind="llama"` -> `LlamaForCausalLM` (or `LlamaModel` for a bare
    body), `kind="eurobert"` -> `EuroBertForMaskedLM` (or `EuroBertModel`)."""
    from transformers import EuroBertForMaskedLM, EuroBertModel, LlamaForCausalLM, LlamaModel

    if kind not in ("llama", "eurobert"):
        raise ConversionError(f"to_hf: kind must be 'llama' or 'eurobert', got {kind!r}")
    if not isinstance(model, (MlmClmModel, MlmClmForMaskedLM, MlmClmForCausalLM)):
        raise ConversionError(f"to_hf: cannot convert {type(model).__name__}; convert the language model or its body")
    c = model.config
    kwargs = {k: getattr(c, k) for k in _SHARED}
    rope = {"rope_type": "default", "rope_theta": c.rope_theta}
    if kind == "llama":
        hf_config = LlamaConfig(**kwargs, rope_parameters=rope, hidden_act="silu")
        target = LlamaModel if isinstance(model, MlmClmModel) else LlamaForCausalLM
    else:
        extra = {} if c.mask_token_id is None else {"mask_token_id": c.mask_token_id}
        hf_config = EuroBertConfig(**kwargs, rope_parameters=rope, hidden_act="silu", **extra)
        target = EuroBertModel if isinstance(model, MlmClmModel) else EuroBertForMaskedLM
    hf_config.tie_word_embeddings = c.tie_word_embeddings
    hf = target(hf_config)  # built on the CPU, not on meta: its rotary buffers are computed at construction
    hf.load_state_dict(model.state_dict(), strict=True)
    if c.tie_word_embeddings and hasattr(hf, "lm_head"):
        hf.tie_weights()
    hf = hf.to(dtype=next(model.parameters()).dtype)
    return hf.train(model.training)


def load_hf_decoder(path: str, gguf_file: str | None = None, model: bool = True):
    """A Llama-family causal LM (None without `model`) and its tokenizer from a transformers folder `path` (a run's
    `init.path`) or the GGUF file `gguf_file` in it, fp32; `from_hf` converts the model."""
    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        if not model:
            return None, tokenizer
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kwargs)
    except OSError as e:
        raise ConfigError(f"init.path={path!r}: cannot load a transformers causal LM there "
                          f"({str(e).splitlines()[0]})") from None
    return model, tokenizer
