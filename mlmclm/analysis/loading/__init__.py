"""Loading results: result files -> one tidy table (`results.load`, which re-exports the names below).

`ids` (the tables' columns, model ids parsed, sizes and steps as printed), `lineage` (a model's attributes and its
pretraining-seed family from its run's records), `published` (the paper's tables, the authors' sample), `run_tree`
(results.json files, pretraining logs, parameter counts), `aggregation` (runs -> scores, pretraining seeds pooled),
`views` (what each study compares), `compute` (FLOPs and tokens per parameter). Imports no other room of analysis.
"""
