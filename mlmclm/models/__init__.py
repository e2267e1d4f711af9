"""The transformer and everything that defines it: `configuration` (MlmClmConfig, the named sizes), `modeling`
(causal or bidirectional per call; the heads), `attention` (backends; `kernels/` in the Hugging Face kernels
layout), `convert` (from_hf / to_hf). Training FLOPs are counted in `mlmclm.flops` (torch-free).

Importing this package registers the models with transformers' Auto classes (`AutoConfig`, `AutoModel`,
`AutoModelForMaskedLM`, `AutoModelForCausalLM`, ...), so mlmclm checkpoints load with `from_pretrained`.
"""

from transformers import (
    AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification, AutoModelForTokenClassification,
)

from .configuration import MlmClmConfig
from .convert import from_hf, to_hf
from .modeling import (
    MlmClmForCausalLM, MlmClmForMaskedLM, MlmClmForQuestionAnswering, MlmClmForSequenceClassification,
    MlmClmForTokenClassification, MlmClmModel, mean_pool,
)

AutoConfig.register(MlmClmConfig.model_type, MlmClmConfig, exist_ok=True)
for _auto, _cls in ((AutoModel, MlmClmModel), (AutoModelForMaskedLM, MlmClmForMaskedLM),
                    (AutoModelForCausalLM, MlmClmForCausalLM),
                    (AutoModelForSequenceClassification, MlmClmForSequenceClassification),
                    (AutoModelForTokenClassification, MlmClmForTokenClassification),
                    (AutoModelForQuestionAnswering, MlmClmForQuestionAnswering)):
    _auto.register(MlmClmConfig, _cls, exist_ok=True)

__all__ = [
    "MlmClmConfig", "MlmClmModel", "MlmClmForMaskedLM", "MlmClmForCausalLM", "MlmClmForSequenceClassification",
    "MlmClmForTokenClassification", "MlmClmForQuestionAnswering", "from_hf", "to_hf", "mean_pool",
]
