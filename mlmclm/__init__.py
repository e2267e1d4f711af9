"""mlmclm: companion code of "Should We Still Pretrain Encoders with Masked Language Modeling?" (arXiv 2507.00994).

Four subpackages, imported in this direction (a subpackage never imports one listed below it; `analysis` reads result
files and never imports torch):

    models/      the transformer: configuration, modeling, attention (backends, kernels/), convert
    training/    objectives, corpus, pretrain, checkpoints
    evaluation/  tasks, offline_suite, finetune, metrics
    analysis/    results, tables, figures, claims, notebooks

and modules at the top level of the package:

    config, errors, io, locks, flops, sizes, fetch   helpers the subpackages import: the config dataclasses, the
                                                     errors, atomic writes, folder locks, FLOPs, the model sizes,
                                                     registry downloads
    studies, bench, export, workspace                jobs built on the subpackages: the five studies, benchmarks, a
                                                     checkpoint in transformers' format, a working folder
    cli, commands                                    the command line

`import mlmclm` is light: the public names below load their subpackage on first use, so a notebook that only reads
results never starts torch. Using any model name (`mlmclm.MlmClmConfig`, `mlmclm.MlmClmForMaskedLM`, ...) imports
`mlmclm.models`, which registers the models with transformers' Auto classes, so mlmclm checkpoints load with
`AutoModel.from_pretrained` and friends.
"""

import importlib

__version__ = "0.1.0"

_MODELS = ("MlmClmConfig", "MlmClmModel", "MlmClmForMaskedLM", "MlmClmForCausalLM", "MlmClmForSequenceClassification",
           "MlmClmForTokenClassification", "MlmClmForQuestionAnswering", "from_hf", "to_hf", "mean_pool")
# modules users and notebooks import as `from mlmclm import results`: where each one lives
_MODULES = {"results": "analysis.loading", "tables": "analysis.drawing", "figures": "analysis.drawing",
            "claims": "analysis.judging", "evidence": "analysis.judging", "notebooks": "analysis.drawing",
            "configuration": "models", "modeling": "models", "attention": "models", "convert": "models",
            "objectives": "training", "corpus": "training", "pretrain": "training", "checkpoints": "training",
            "tasks": "evaluation", "offline_suite": "evaluation", "finetune": "evaluation", "metrics": "evaluation"}

__all__ = list(_MODELS)


def __getattr__(name: str):
    if name in _MODELS:
        return getattr(importlib.import_module(".models", __name__), name)
    if name in _MODULES:
        return importlib.import_module(f".{_MODULES[name]}.{name}", __name__)
    raise AttributeError(f"module 'mlmclm' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_MODELS, *_MODULES])
