"""What a model costs, for the figures that place checkpoints by compute or data: training FLOPs of each checkpoint
(`with_flops`, one function for every size, by one of the two rules of `FLOPS_RULES`, both counted by
`mlmclm.flops.flops_per_token`) and its pretraining tokens per parameter on each axis of `AXES`
(`tokens_per_axis`). A size is described either by Table 1's shapes (``layers``, ``d_model`` ...:
`published.architecture`) or by a run folder's parameter counts (``embeddings``, ``body``, ``output_layer``:
`run_tree.run_parameters`); both carry ``tokens_per_step``. No torch import here.
"""

from __future__ import annotations

import math

import pandas as pd

from ... import flops
from ...errors import ResultFileError
from ...runs import ModelId
from ...schedule import Ramp, parse_objective

# Fig. 10's FLOPs, in a caption: the paper's sizes (Table 1's shapes) and ours (each run folder's parameter counts).
FLOPS_RULES = {  # the captions of two rules of `mlmclm.flops.RULES` (tests/test_figures.py checks the keys)
    "App. F": "Hoffmann et al. (2022, App. F) on the size's shapes (Table 1), adapted to GQA and SwiGLU: 3 x forward, "
              "attention scores at full context, embeddings and softmax counted; an MLM step computes output logits "
              "only at its masked positions (the mask ratio of its tokens), a CLM step at all of them",
    "6N": "6 x tokens x (V d + body + f V d): the input embedding, the body's parameters (norms included) and the "
          "output layer on a fraction f of the tokens (the mask ratio for MLM steps, 1 for CLM steps), with the counts "
          "of the run folder's meta.json and its config.yaml's tokens a step; App. F without its attention-score and "
          "softmax terms, which need the layer count (a few percent at a 64-token context)",
}
# What a checkpoint's pretraining tokens are counted against (`tokens_per_parameter`), as an axis label: the
# body (no embeddings, no output layer), the body and the input embedding, every parameter (the output layer too).
AXES = {"body": "tokens per body parameter", "body+embedding": "tokens per body+embedding parameter",
        "all": "tokens per parameter (all)"}
# The parameters each axis counts (`parameter_counts`)
AXIS_PARTS = {"body": ("body",), "body+embedding": ("body", "embeddings"),
              "all": ("body", "embeddings", "output_layer")}
# Table 1 does not say whether the paper's models tie their output layer to the input embedding; they do not: the
# released models' config.json says tie_word_embeddings false, EuroBERT/Optimus's 210m and 610m configs
# tied_weights False (and `mlmclm.sizes` builds Table 1's sizes untied, `MlmClmConfig`'s default).
PAPER_TIED_EMBEDDINGS = False


def flops_per_step(arch: dict, mlm_fraction: float) -> float:
    """Training FLOPs of one step of a size of Table 1's shapes (``arch``: ``layers``, ``d_model`` ...,
    ``tokens_per_step``): Hoffmann et al. (2022, App. F) counting, adapted to GQA and SwiGLU, the "App. F" rule of
    ``mlmclm.flops.flops_per_token`` (embeddings and softmax counted, norm weights not). The output logits of an MLM
    step are computed only at its masked positions (``mlm_fraction`` of the tokens); backward = 2 x forward."""
    counts = flops.terms(layers=arch["layers"], d_model=arch["d_model"], ffn=arch["ffn"], heads=arch["heads"],
                         kv_heads=arch["kv_heads"], vocab=arch["vocab"], seq_len=arch["seq_len"])
    return arch["tokens_per_step"] * flops.flops_per_token("App. F", **counts, output_fraction=mlm_fraction)


def checkpoint_flops(a: dict, clm_steps: int, mlm_steps: int, mask_ratio) -> tuple[float, str]:
    """Training FLOPs of a checkpoint of ``clm_steps`` CLM and ``mlm_steps`` MLM steps at ``mask_ratio`` (%; missing
    for a CLM-only model) of a size described by ``a``, and the rule counted (a key of ``FLOPS_RULES``, of
    ``mlmclm.flops.RULES``): "App. F" on Table 1's shapes (`flops_per_step`), "6N" on a run folder's parameter counts
    (the input embedding, the body and the output layer on the fraction of a step's tokens it scores)."""
    fraction = float(mask_ratio) / 100 if pd.notna(mask_ratio) else 1.0
    if "layers" in a:
        return clm_steps * flops_per_step(a, 1.0) + mlm_steps * flops_per_step(a, fraction), "App. F"
    step = [a["tokens_per_step"] * flops.flops_per_token("6N", body=a["body"], embedding=a["embeddings"],
                                                         output_fraction=share) for share in (1.0, fraction)]
    return clm_steps * step[0] + mlm_steps * step[1], "6N"


def ramp_mask_ratio(model: str, steps: int) -> float:
    """The mean masking ratio (%) over the first ``steps`` steps of a masking-ratio ramp's run (``objective``
    ``ramp``: ``twin-mlm40to20-21k``; a CPT of it, its MLM phase at its own ratio), each step's ratio as pretraining
    masks it (`Ramp.at`): its FLOPs are those of MLM at that ratio, a step's FLOPs being linear in its output
    fraction. A `ResultFileError` where ``model`` is not the id of a run that starts with a ramp."""
    m = ModelId.parse(model)
    ramp = parse_objective(m.objective)
    if not isinstance(ramp, Ramp):
        raise ResultFileError(f"model {model!r}: its id names no masking-ratio ramp (mlm{{a}}to{{b}}) as its first "
                              "phase, so its FLOPs cannot be counted; name the run by its model id")
    ramped = min(steps, m.steps)
    percent = 100 * sum(ramp.at(i, m.steps).mask_ratio for i in range(ramped))
    return (percent + (steps - ramped) * (m.mask_ratio or 0)) / steps


def with_flops(view: pd.DataFrame, architecture: dict) -> pd.DataFrame:
    """Add ``flops`` (training FLOPs of each checkpoint, `checkpoint_flops`; a ramp's MLM at its mean ratio,
    `ramp_mask_ratio`) and ``flops_rule`` (a key of ``FLOPS_RULES``) to the rows of ``view`` whose size is in
    ``architecture``: the sizes of Table 1's shapes first, then those of parameter counts."""
    shaped = [size for size, a in architecture.items() if "layers" in a]
    df = view[view["size"].isin(list(architecture))]
    df = pd.concat([df[df["size"].isin(shaped)], df[~df["size"].isin(shaped)]], ignore_index=True)
    ratios = [ramp_mask_ratio(r.model, r.steps) if r.objective == "ramp" else r.mask_ratio for r in df.itertuples()]
    counted = [checkpoint_flops(architecture[r.size], r.clm_steps, r.mlm_steps, ratio)
               for r, ratio in zip(df.itertuples(), ratios)]
    return df.assign(flops=[f for f, _ in counted], flops_rule=[rule for _, rule in counted])


def parameter_counts(a: dict) -> dict:
    """{embeddings, body, output_layer} of one size of ``architecture``: our run folder's counts (``run_parameters``;
    ``output_layer`` NaN where its meta.json has none), or from Table 1's shape for the paper's sizes: the body by
    `flops.body_parameters` (norms included), the input embedding vocab x d_model, and the output layer as large
    again unless tied (a shape's ``tied``, default ``PAPER_TIED_EMBEDDINGS``: the paper's models are not)."""
    if "layers" not in a:
        return {"embeddings": a["embeddings"], "body": a["body"], "output_layer": a.get("output_layer", math.nan)}
    embeddings = a["vocab"] * a["d_model"]
    tied = a.get("tied", PAPER_TIED_EMBEDDINGS)
    return {"embeddings": embeddings, "output_layer": 0 if tied else embeddings,
            "body": flops.body_parameters(layers=a["layers"], d_model=a["d_model"], ffn=a["ffn"], heads=a["heads"],
                                    kv_heads=a["kv_heads"])}


def tokens_per_parameter(architecture: dict, axis: str = "body") -> dict:
    """Per size, pretraining tokens a step per parameter on ``axis`` (a key of ``AXES``: the parameters of
    ``AXIS_PARTS[axis]`` by `parameter_counts`): Table 1's shapes for the paper's sizes, a run folder's parameter
    counts for ours (``run_parameters``). NaN where a count is unknown (a meta.json without ``output_layer``)."""
    if axis not in AXES:
        raise ValueError(f"unknown axis {axis!r}; choose one of {', '.join(AXES)}")
    out = {}
    for size, a in architecture.items():
        counts = parameter_counts(a)
        out[size] = a["tokens_per_step"] / sum(counts[part] for part in AXIS_PARTS[axis])
    return out


def tokens_per_axis(architecture: dict) -> dict:
    """{axis: `tokens_per_parameter` on that axis} for every axis of ``AXES``, in their order."""
    return {axis: tokens_per_parameter(architecture, axis) for axis in AXES}
