"""From stored results to what a reader sees: `results` (paper + ours + EncodEval in one tidy table, over `ids`,
`published`, `run_tree`, `aggregation`, `views` and `compute`), `tables`, `figures` (drawn with `drawing` and
`points`), `claims` (verdicts with intervals and controls: `judge`, `bootstrap`, `evidence`, `matching`), `notebooks`
(papermill). Never imports torch.
"""
