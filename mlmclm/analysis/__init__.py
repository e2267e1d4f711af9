"""From stored results to what a reader sees: `results` (paper + ours + EncodEval in one tidy table), `tables`,
`figures`, `claims` (verdicts with intervals and controls), `notebooks` (papermill). Never imports torch.
"""
