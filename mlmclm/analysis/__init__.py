"""From stored results to what a reader sees, in three rooms by job; imports flow one way, loading <- judging <-
drawing (`tests/test_layout.py` checks it), and nothing here imports torch:

    loading/   result files -> one tidy table (`results.load`: the paper's, ours, EncodEval's), the study views
    judging/   the paper's claims -> verdicts: intervals, controls, gates (`claims`, `judge`, `bootstrap`, `evidence`)
    drawing/   tables, figures and the notebooks that write them (`tables`, `figures`, `notebooks`)

Notebooks and users import the public modules as `from mlmclm import results, claims, tables, figures, notebooks`.
"""
