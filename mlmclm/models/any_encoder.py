"""Any transformers encoder (`AutoModel`: BERT, RoBERTa, ModernBERT, ...) under mlmclm's task heads.

`EncoderWithHead` wraps the encoder's body with the head mlmclm's own models have for the task group: mean pooling +
linear layer (SC), a linear layer on every token (TC), start/end logits (QA), none for IR (the body's mean-pooled
hidden states are the embeddings). The heads' losses and outputs are `modeling`'s, so a BERT and an mlmclm model are
fine-tuned by the same code. Attention is the encoder's own (bidirectional); `is_causal=True` is refused. The body
may be a checkpoint's own code (transformers' `trust_remote_code`, which `evaluation.checkpoint` takes as an explicit
opt-in, e.g. the paper's released `SLModel`s): it needs only to take `input_ids` and `attention_mask` and return a
`last_hidden_state`.
"""

from __future__ import annotations

from torch import nn
from transformers.modeling_outputs import BaseModelOutput, SequenceClassifierOutput, TokenClassifierOutput

from .modeling import mean_pool, question_answering_output, sequence_classification_loss, token_classification_loss


def _embeddings(head, hidden, mask, labels, start_positions, end_positions):
    return BaseModelOutput(last_hidden_state=hidden)


def _sequence_classification(head, hidden, mask, labels, start_positions, end_positions):
    logits = head(mean_pool(hidden, mask))
    loss = None if labels is None else sequence_classification_loss(logits, labels)
    return SequenceClassifierOutput(loss=loss, logits=logits)


def _token_classification(head, hidden, mask, labels, start_positions, end_positions):
    logits = head(hidden)
    loss = None if labels is None else token_classification_loss(logits, labels)
    return TokenClassifierOutput(loss=loss, logits=logits)


def _question_answering(head, hidden, mask, labels, start_positions, end_positions):
    return question_answering_output(head(hidden), mask, start_positions, end_positions)


# group -> (the linear head's outputs for a task of n labels, or None: no head; the output from the hidden states)
HEADS = {
    "SC": (lambda n: n, _sequence_classification),
    "TC": (lambda n: n, _token_classification),
    "QA": (lambda n: 2, _question_answering),
    "IR": (None, _embeddings),
}


class EncoderWithHead(nn.Module):
    """`body` (a transformers base model returning `last_hidden_state`) + a new head for `group` (SC, TC, QA or IR:
    `HEADS`), initialised as mlmclm's heads (normal, std `initializer_range`; zero bias). The forward takes mlmclm's
    arguments and returns what mlmclm's head models return."""

    def __init__(self, body: nn.Module, group: str, num_labels: int = 0):
        super().__init__()
        self.body, self.group, self.config = body, group, body.config
        outputs, self._output = HEADS[group]
        self.head = None if outputs is None else nn.Linear(body.config.hidden_size, outputs(num_labels))
        if self.head is not None:
            nn.init.normal_(self.head.weight, std=getattr(body.config, "initializer_range", 0.02))
            nn.init.zeros_(self.head.bias)

    def forward(self, input_ids=None, attention_mask=None, labels=None, start_positions=None, end_positions=None,
                is_causal: bool | None = None, **kwargs):
        if is_causal:
            raise ValueError(f"{type(self.body).__name__} is an encoder: it has no causal mode (is_causal=True)")
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self._output(self.head, hidden, attention_mask, labels, start_positions, end_positions)
