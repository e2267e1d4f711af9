"""Judging claims: the loaded results -> a verdict on each of the paper's claims (and ours beyond it).

`claims` (one `Claim` each, the `CLAIMS` registry; `beyond`: the claims beyond the paper), `comparisons` (the checks'
building blocks), `judge` (intervals, gates, verdicts), `bootstrap` (the intervals of ours), `coverage` (how often
they cover, simulated), `evidence` (controls, the fine-tuning plateau, calibration), `matching` (the paper's estimate
of the same comparison). Imports `loading`, never `drawing`.
"""
