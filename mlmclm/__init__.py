"""mlmclm: companion code of "Should We Still Pretrain Encoders with Masked Language Modeling?" (arXiv 2507.00994).

Five rooms, imported in this direction (a room never imports one listed below it; `tests/test_layout.py` checks it):

    models/      the transformer: configuration, modeling, attention (backends, kernels/), convert, any_encoder
    training/    pretraining: objectives, sources, corpus, tokenizer, shards, build, pretrain, ownership, optim,
                 checkpoints, reshard, trackers
    evaluation/  fine-tuning: catalog, grid, tasks, paper_suite, offline_suite, finetune, checkpoint, groups/,
                 workers, metrics
    analysis/    stored results -> what a reader sees (reads result files only, never imports torch), in three rooms
                 imported loading <- judging <- drawing:
                   loading/   results (`load`: one tidy table), ids, lineage, published, run_tree, aggregation, views,
                              compute
                   judging/   claims, beyond, comparisons, judge, bootstrap, coverage, evidence, matching
                   drawing/   tables, figures, kit, points, notebooks
    studies/     the five studies in the paper's units: plan, design, configs, state, runner, estimate, report

and modules at the top level of the package:

    errors, flops, sizes, schedule, io, fetch, locks, workspace, config_loader, config, runs
                                  torch-free helpers every room may import: the errors, FLOPs, the model sizes, the
                                  objectives and a run's schedule, atomic writes and the working root, registry
                                  downloads, folder locks, `mlmclm init`'s working folder, the config dataclasses, a
                                  model id and where a run and its results live
    export, bench, gpu_check      jobs built on the rooms: a checkpoint in transformers' format, benchmarks, the GPU
                                  check
    cli, commands, __main__       the command line (`mlmclm <verb>`, `python -m mlmclm`)

`import mlmclm` is light: the public names below load their room on first use, so a notebook that only reads results
never starts torch; `from mlmclm import results, claims, tables, figures, notebooks` gives analysis's modules.
Using any model name (`mlmclm.MlmClmConfig`, `mlmclm.MlmClmForMaskedLM`, ...) imports `mlmclm.models`, which
registers the models with transformers' Auto classes, so mlmclm checkpoints load with `AutoModel.from_pretrained` and
friends.
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
