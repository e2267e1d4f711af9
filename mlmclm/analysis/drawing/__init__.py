"""Drawing outputs: the loaded results and verdicts -> tables, figures and the executed notebooks.

`tables` (the paper's tables, ours beside them), `figures` (one function a figure; `kit`: the figures' style and
helpers; `points`: a figure point and its one interval), `notebooks` (what the notebooks share at start-up; running
all five with papermill). Imports `loading` and `judging`.
"""
