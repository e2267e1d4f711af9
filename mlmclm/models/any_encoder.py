"""Any transformers encoder (`AutoModel`: BERT, RoBERTa, ModernBERT, ...) under mlmclm's task heads.

`EncoderWithHead` wraps the encoder's body with the head mlmclm's own models have for the task group: mean pooling +
linear layer (SC), a linear layer on every token (TC), start/end logits (QA), none for IR (the body's mean-pooled
hidden states are the embeddings). The heads' losses and outputs are `modeling`'s, so a BERT and an mlmclm model are
fine-tuned by the same code. Attention is the encoder's own (bidirectional); `is_causal=True` is refused.
"""

from __future__ import annotations

from torch import nn
from transformers.modeling_outputs import BaseModelOutput, SequenceClassifierOutput, TokenClassifierOutput

from .modeling import mean_pool, question_answering_output, sequence_classification_loss, token_classification_loss


class EncoderWithHead(nn.Module):
    """`body` (a transformers base model returning `last_hidden_state`) + a new head for `group` (SC, TC, QA or IR),
    initialised as mlmclm's heads (normal, std `initializer_range`; zero bias). The forward takes mlmclm's arguments
    and returns what mlmclm's head models return."""

    def __init__(self, body: nn.Module, group: str, num_labels: int = 0):
        super().__init__()
        self.body, self.group, self.config = body, group, body.config
        out = {"SC": num_labels, "TC": num_labels, "QA": 2}.get(group)
        self.head = None if out is None else nn.Linear(body.config.hidden_size, out)
        if self.head is not None:
            nn.init.normal_(self.head.weight, std=getattr(body.config, "initializer_range", 0.02))
            nn.init.zeros_(self.head.bias)

    def forward(self, input_ids=None, attention_mask=None, labels=None, start_positions=None, end_positions=None,
                is_causal: bool | None = None, **kwargs):
        if is_causal:
            raise ValueError(f"{type(self.body).__name__} is an encoder: it has no causal mode (is_causal=True)")
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if self.group == "IR":
            return BaseModelOutput(last_hidden_state=hidden)
        if self.group == "QA":
            return question_answering_output(self.head(hidden), attention_mask, start_positions, end_positions)
        if self.group == "SC":
            logits = self.head(mean_pool(hidden, attention_mask))
            loss = None if labels is None else sequence_classification_loss(logits, labels)
            return SequenceClassifierOutput(loss=loss, logits=logits)
        logits = self.head(hidden)
        loss = None if labels is None else token_classification_loss(logits, labels)
        return TokenClassifierOutput(loss=loss, logits=logits)
