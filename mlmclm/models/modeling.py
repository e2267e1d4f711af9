"""One Llama/EuroBERT-style transformer, causal or bidirectional per forward call, and its task heads.

The body (`MlmClmModel`) is RMSNorm pre-norm blocks with grouped-query attention, RoPE and a SwiGLU MLP, no biases.
Every forward takes `is_causal` (None: `config.is_causal`); the same weights train with CLM, then MLM. Masked-LM and
causal-LM models have the same weight layout (and the same as transformers' `LlamaForCausalLM`/`EuroBertForMaskedLM`).

Labels, one convention a class, each transformers' own for that class (the one place this is written down):

- `MlmClmForMaskedLM`: `labels[t]` is what position t must output, -100 where nothing (as `EuroBertForMaskedLM`).
  For MLM the original token at masked positions. For CLM, run with `is_causal=True` (pretraining and the benchmarks
  train every objective through this one class and its sparse head), the next token: labels shifted in advance,
  `mlmclm.training.objectives.clm_labels(ids, shift=True)` (the last position -100).
- `MlmClmForCausalLM`: `labels` aligned with `input_ids` (`labels=input_ids` works) and shifted inside, as
  `LlamaForCausalLM`; with `document_ids`, a target across a document boundary is dropped.

On the same batch both give the same loss (`clm_labels(ids, bos_token_id=bos, shift=True)` in the first, its
unshifted form in the second; padding ignored either way): tests/test_objectives.py checks it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput, CausalLMOutput, MaskedLMOutput, QuestionAnsweringModelOutput, SequenceClassifierOutput,
    TokenClassifierOutput,
)

from .attention import attention, check_backend, prepare_mask
from .configuration import HF_ATTN_IMPLEMENTATION, MlmClmConfig, attention_backend_of


class MlmClmRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotary_cos_sin(position_ids, head_dim: int, theta: float, dtype):
    """cos and sin of RoPE for (B, T) positions: (B, 1, T, head_dim) each."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=position_ids.device, dtype=torch.float32) / head_dim)
    freqs = position_ids[..., None].float() * inv_freq  # (B, T, head_dim / 2)
    emb = torch.cat([freqs, freqs], dim=-1)[:, None]  # (B, 1, T, head_dim)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary(x, cos, sin):
    return x * cos + _rotate_half(x) * sin


class MlmClmAttention(nn.Module):
    def __init__(self, config: MlmClmConfig):
        super().__init__()
        self.config = config
        self.n_heads, self.n_kv, self.head_dim = config.num_attention_heads, config.num_key_value_heads, config.head_dim
        d = config.hidden_size
        self.q_proj = nn.Linear(d, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, d, bias=False)

    def forward(self, x, cos, sin, mask):
        """x: (B, T, d); `mask`: the AttentionMask the model prepared once for all its layers."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hs)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hs)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = attention(q, k, v, is_causal=mask.is_causal, attention_mask=mask,
                        backend=self.config.attention_backend)  # (B, nh, T, hs)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))  # (B, T, nh * hs) -> (B, T, d)


class MlmClmMLP(nn.Module):
    def __init__(self, config: MlmClmConfig):
        super().__init__()
        d, f = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MlmClmDecoderLayer(GradientCheckpointingLayer):
    def __init__(self, config: MlmClmConfig):
        super().__init__()
        self.self_attn = MlmClmAttention(config)
        self.mlp = MlmClmMLP(config)
        self.input_layernorm = MlmClmRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = MlmClmRMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class MlmClmPreTrainedModel(PreTrainedModel):
    config_class = MlmClmConfig
    config: MlmClmConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["MlmClmDecoderLayer"]
    _supports_sdpa = _supports_flex_attn = True  # transformers' names of our backends (`configuration`'s docstring)

    def __init__(self, config: MlmClmConfig, *args, **kwargs):
        super().__init__(config, *args, **kwargs)
        self._record_backend()

    def _record_backend(self) -> None:
        """transformers' record of the attention (`config._attn_implementation`) says the backend that runs, where
        it has a name for it."""
        if self.config.attention_backend in HF_ATTN_IMPLEMENTATION:
            self.config._attn_implementation_internal = HF_ATTN_IMPLEMENTATION[self.config.attention_backend]

    def set_attention_backend(self, backend: str) -> None:
        """Switch the attention backend of the whole model (recorded in `config.attention_backend`)."""
        check_backend(backend, self.device)
        self.config.attention_backend = backend
        self._record_backend()

    def set_attn_implementation(self, attn_implementation: str, allow_all_kernels: bool = False) -> None:
        """transformers' way to switch attention: `set_attention_backend` of the backend its name means
        (`configuration.HF_ATTN_IMPLEMENTATION`)."""
        self.set_attention_backend(attention_backend_of(attn_implementation))

    def _is_causal(self, is_causal: bool | None) -> bool:
        return self.config.is_causal if is_causal is None else bool(is_causal)


def document_position_ids(document_ids):
    """Positions that restart at 0 at every document start of each row."""
    b, t = document_ids.shape
    ar = torch.arange(t, device=document_ids.device).expand(b, t)
    starts = torch.ones_like(document_ids, dtype=torch.bool)
    starts[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]
    return ar - torch.cummax(torch.where(starts, ar, 0), dim=1).values


def mean_pool(hidden, attention_mask=None):
    """Mean of the hidden states over real (non-padding) tokens: (B, T, D) -> (B, D)."""
    if attention_mask is None:
        return hidden.mean(1)
    m = attention_mask.to(hidden.dtype)[..., None]
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


class MlmClmModel(MlmClmPreTrainedModel):
    """The transformer body. Packed sequences: pass `document_ids` (B, T) and attention stays within each document
    and positions restart per document (off unless given, as in the paper's code)."""

    def __init__(self, config: MlmClmConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(MlmClmDecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = MlmClmRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.gradient_checkpointing = False
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, document_ids=None, inputs_embeds=None,
                is_causal: bool | None = None, output_hidden_states: bool = False, **kwargs) -> BaseModelOutput:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, d)
        b, t = x.shape[:2]
        if position_ids is None:
            position_ids = (document_position_ids(document_ids) if document_ids is not None
                            else torch.arange(t, device=x.device).expand(b, t))
        cos, sin = rotary_cos_sin(position_ids, self.config.head_dim, self.config.rope_theta, x.dtype)
        causal = self._is_causal(is_causal)
        # The attention mask, prepared once for every layer (as LlamaModel.forward does): its host sync, if any, and
        # its (B, 1, T, T) mask, document layout or block mask are made here, not in each layer.
        mask = prepare_mask(attention_mask, document_ids, is_causal=causal, backend=self.config.attention_backend,
                            batch=b, seq_len=t, device=x.device)
        hidden_states = [x] if output_hidden_states else None
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
            if output_hidden_states:
                hidden_states.append(x)
        x = self.norm(x)
        if output_hidden_states:
            hidden_states[-1] = x
        return BaseModelOutput(last_hidden_state=x, hidden_states=tuple(hidden_states) if hidden_states else None)


IGNORE = -100  # the label of a position that has no target (padding, unmasked tokens, non-first sub-words)
# logits above this many elements (512 MiB in fp32) are never materialised at once: on one H200 the 210M CLM step ran
# at 19.9% MFU with chunks of 2^27 against 15.5% with 2^25 and 8.0% with 2^23, at 780 MiB more peak memory
# (results/bench/gpu.csv, its loss-chunk rows)
CE_CHUNK_ELEMENTS = 1 << 27


class _LinearCrossEntropy(torch.autograd.Function):
    """sum_i CE(hidden_i @ weight^T, label_i), chunk by chunk: each chunk's logits give the loss and, right away,
    the gradients of hidden and weight; only those are kept for backward, never the (N, vocab) logits."""

    @staticmethod
    def forward(ctx, hidden, weight, labels, chunk):
        # the matrix products run in the autocast dtype where autocast is on, as `lm_head(hidden)` would: the final
        # norm returns fp32, and fp32 products took 3/4 of a 210m CLM step on an H100 (results/bench/mfu.csv)
        device = hidden.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
        with torch.autocast(device, enabled=False):
            x, w = hidden.to(dtype), weight.to(dtype)
            grad_h = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
            grad_w = torch.zeros_like(weight, dtype=torch.float32) if ctx.needs_input_grad[1] else None
            total = torch.zeros((), dtype=torch.float32, device=hidden.device)
            for start in range(0, x.shape[0], chunk):
                h, y = x[start:start + chunk], labels[start:start + chunk]
                logits = (h @ w.T).float()
                lse = torch.logsumexp(logits, dim=-1)
                total += (lse - logits.gather(1, y[:, None]).squeeze(1)).sum()
                if grad_h is None and grad_w is None:
                    continue
                g = logits.sub_(lse[:, None]).exp_()  # softmax, in place of the logits
                g[torch.arange(y.shape[0], device=y.device), y] -= 1
                g = g.to(dtype)
                if grad_h is not None:
                    grad_h[start:start + chunk] = g @ w
                if grad_w is not None:
                    grad_w += (g.T @ h).float()
        ctx.save_for_backward(grad_h, grad_w)
        ctx.weight_dtype = weight.dtype
        return total

    @staticmethod
    def backward(ctx, grad):
        grad_h, grad_w = ctx.saved_tensors
        return (None if grad_h is None else grad_h * grad.to(grad_h.dtype),
                None if grad_w is None else (grad_w * grad).to(ctx.weight_dtype), None, None)


@torch.compiler.disable
def linear_cross_entropy(hidden, weight, labels, chunk: int = 4096):
    """Summed cross-entropy of a linear output layer without materialising the full logits (see above). Kept out of
    `torch.compile`'s graph (run eagerly between the compiled parts): traced, its chunk loop is unrolled (about 26 graph
    nodes a chunk), and the compile of the 210M CLM step's 252 chunks ran over 10 minutes on CPU."""
    return _LinearCrossEntropy.apply(hidden, weight, labels, chunk)


class _MlmClmLanguageModel(MlmClmPreTrainedModel):
    """Body + output layer; MLM and CLM differ only in which positions the loss reads."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: MlmClmConfig):
        super().__init__(config)
        self.model = MlmClmModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def _sparse_loss(self, hidden, labels, num_items_in_batch, positions=None):
        """Cross-entropy over labelled positions only: only they reach the output layer. The sum is divided by
        `num_items_in_batch` when given (the global label count under gradient accumulation), else by the local
        count. Returns (loss, logits of the labelled positions), or (loss, None) when those logits would exceed
        `CE_CHUNK_ELEMENTS`: then the loss is computed chunk by chunk and the full logits never exist.
        `positions`: the flat indices of the labelled positions (labels != IGNORE), given by a caller that knows
        them (the pretraining loop, from its labels on the host): the same rows without boolean indexing's sync."""
        selected = labels != IGNORE
        if positions is None:
            hidden, targets = hidden[selected], labels[selected]  # host sync (boolean indexing): (N, d), (N,)
        else:
            hidden = hidden.reshape(-1, hidden.shape[-1]).index_select(0, positions)
            targets = labels.reshape(-1).index_select(0, positions)
        if hidden.shape[0] * self.config.vocab_size > CE_CHUNK_ELEMENTS:
            logits = None
            chunk = max(1, CE_CHUNK_ELEMENTS // self.config.vocab_size)
            total = linear_cross_entropy(hidden, self.lm_head.weight, targets, chunk)
        else:
            logits = self.lm_head(hidden)
            total = F.cross_entropy(logits.float(), targets, reduction="sum")
        denom = selected.sum() if num_items_in_batch is None else num_items_in_batch
        return total / torch.as_tensor(denom, device=total.device).clamp_min(1), logits


class MlmClmForMaskedLM(_MlmClmLanguageModel):
    """Masked LM: `labels` hold the original token at masked positions and -100 elsewhere (run causally for CLM:
    the next token, shifted in advance; the module docstring). With labels, `logits` are those of the labelled
    positions only, shape (n_labelled, vocab); without, dense (B, T, vocab). `label_positions` (optional): the flat
    indices of the labelled positions, which spares a host sync."""

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, document_ids=None, inputs_embeds=None,
                labels=None, is_causal: bool | None = None, num_items_in_batch=None, output_hidden_states=False,
                label_positions=None, **kwargs) -> MaskedLMOutput:
        out = self.model(input_ids, attention_mask, position_ids, document_ids, inputs_embeds, is_causal=is_causal,
                         output_hidden_states=output_hidden_states)
        if labels is None:
            return MaskedLMOutput(logits=self.lm_head(out.last_hidden_state), hidden_states=out.hidden_states)
        loss, logits = self._sparse_loss(out.last_hidden_state, labels, num_items_in_batch, label_positions)
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


class MlmClmForCausalLM(_MlmClmLanguageModel):
    """Causal LM: `labels` are aligned with `input_ids` (the shift happens here, transformers' convention, beside
    `MlmClmForMaskedLM`'s in the module docstring; -100 is ignored). With labels, `logits` are those of the
    predicted positions only, shape (n_labelled, vocab); without, dense (B, T, vocab)."""

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, document_ids=None, inputs_embeds=None,
                labels=None, is_causal: bool | None = None, num_items_in_batch=None, output_hidden_states=False,
                **kwargs) -> CausalLMOutput:
        causal = self._is_causal(is_causal)
        if labels is not None and not causal:
            raise ValueError("a causal-LM loss with bidirectional attention sees its own targets; "
                             "pass is_causal=True (or set config.is_causal=True)")
        out = self.model(input_ids, attention_mask, position_ids, document_ids, inputs_embeds, is_causal=causal,
                         output_hidden_states=output_hidden_states)
        if labels is None:
            return CausalLMOutput(logits=self.lm_head(out.last_hidden_state), hidden_states=out.hidden_states)
        shifted = labels[:, 1:]
        if document_ids is not None:  # never predict the first token of a document from the previous document
            shifted = shifted.masked_fill(document_ids[:, 1:] != document_ids[:, :-1], IGNORE)
        loss, logits = self._sparse_loss(out.last_hidden_state[:, :-1], shifted, num_items_in_batch)
        return CausalLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


class _LinearHeadModel(MlmClmPreTrainedModel):
    """Body + one linear layer over `_features(hidden states)`; subclasses choose the features and the loss."""

    output_class = None

    def __init__(self, config: MlmClmConfig):
        super().__init__(config)
        self.model = MlmClmModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, document_ids=None, inputs_embeds=None,
                labels=None, is_causal: bool | None = None, output_hidden_states=False, **kwargs):
        out = self.model(input_ids, attention_mask, position_ids, document_ids, inputs_embeds, is_causal=is_causal,
                         output_hidden_states=output_hidden_states)
        logits = self.classifier(self._features(out.last_hidden_state, attention_mask))
        loss = None if labels is None else self._loss(logits, labels)
        return self.output_class(loss=loss, logits=logits, hidden_states=out.hidden_states)


class MlmClmForSequenceClassification(_LinearHeadModel):
    """Mean pooling over real tokens, then a linear layer. One label: regression (MSE); more: cross-entropy."""

    output_class = SequenceClassifierOutput

    def _features(self, hidden, attention_mask):
        return mean_pool(hidden, attention_mask)

    def _loss(self, logits, labels):
        return sequence_classification_loss(logits, labels)


class MlmClmForTokenClassification(_LinearHeadModel):
    """A linear layer on every token; labels of -100 (padding, non-first sub-words) are ignored."""

    output_class = TokenClassifierOutput

    def _features(self, hidden, attention_mask):
        return hidden

    def _loss(self, logits, labels):
        return token_classification_loss(logits, labels)


class MlmClmForQuestionAnswering(MlmClmPreTrainedModel):
    """Extractive QA: start and end logits per token; the loss is the mean of the two cross-entropies (positions
    outside the sequence are ignored)."""

    def __init__(self, config: MlmClmConfig):
        super().__init__(config)
        self.model = MlmClmModel(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, document_ids=None, inputs_embeds=None,
                start_positions=None, end_positions=None, is_causal: bool | None = None, output_hidden_states=False,
                **kwargs) -> QuestionAnsweringModelOutput:
        out = self.model(input_ids, attention_mask, position_ids, document_ids, inputs_embeds, is_causal=is_causal,
                         output_hidden_states=output_hidden_states)
        return question_answering_output(self.qa_outputs(out.last_hidden_state), attention_mask, start_positions,
                                         end_positions, hidden_states=out.hidden_states)


# The task heads' losses and outputs, shared with `models.any_encoder` (any transformers encoder under these heads).

def sequence_classification_loss(logits, labels):
    """One label: regression (MSE); more: cross-entropy."""
    if logits.shape[-1] == 1:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(logits.float(), labels)


def token_classification_loss(logits, labels):
    """Cross-entropy over every token; labels of -100 (padding, non-first sub-words) are ignored."""
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE)


def question_answering_output(logits, attention_mask=None, start_positions=None, end_positions=None,
                              hidden_states=None) -> QuestionAnsweringModelOutput:
    """Start and end logits from (B, T, 2) logits (padding is never an answer); the loss is the mean of the two
    cross-entropies (positions outside the sequence are ignored)."""
    if attention_mask is not None:
        logits = logits.masked_fill(~attention_mask.bool()[..., None], torch.finfo(logits.dtype).min)
    start_logits, end_logits = logits[..., 0], logits[..., 1]
    loss = None
    if start_positions is not None and end_positions is not None:
        t = start_logits.shape[1]
        start, end = start_positions.clamp(0, t), end_positions.clamp(0, t)
        loss = (F.cross_entropy(start_logits.float(), start, ignore_index=t)
                + F.cross_entropy(end_logits.float(), end, ignore_index=t)) / 2
    return QuestionAnsweringModelOutput(loss=loss, start_logits=start_logits, end_logits=end_logits,
                                        hidden_states=hidden_states)
