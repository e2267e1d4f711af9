"""The vocabulary of the tidy results tables (`results`): their columns, the paper's datasets and task groups, the
attributes the study views select on (`with_attributes`: read from a run's records by `lineage` where it has them,
else parsed from the model id by `parse_model_id`, as for the paper's and EncodEval's models), and sizes, steps and
datasets in the paper's order and spelling. No torch import here.
"""

from __future__ import annotations

import re

import pandas as pd

from ...config import FINETUNE_GROUPS as GROUPS  # the task groups, defined once in config
from ...config import REFERENCE
from ...config import step_text
from ...runs import ModelId
from ...schedule import parse_objective

METRICS = {"SC": "accuracy", "TC": "F1", "QA": "F1", "IR": "NDCG@10"}
# EncodEval folder name -> the paper's column label, in the paper's column order.
DATASETS = {
    "sst2": "SST-2", "qqp": "QQP", "mnli_m": "MNLI",
    "ontonotes": "OntoNotes", "conll2003_en": "CoNLL", "uner_en": "UNER",
    "squad": "SQuAD", "squad_v2": "SQuAD-v2", "record": "ReCoRD",
    "nq": "NQ", "msmarco": "MS MARCO", "mldr_en": "MLDR",
}
PAPER_DATASETS = {g: frozenset(list(DATASETS.values())[3 * i:3 * i + 3]) for i, g in enumerate(GROUPS)}
AVG = "Avg"
PAPER_SEEDS = 5  # fine-tuning seeds behind each of the paper's cells (6 learning rates x 5 seeds)

# ``family``: the model's pretraining-seed family, named by its member with the lowest seed (seed 0: the id without
# ``-pN``; `with_attributes`); the models that differ only in their pretraining seed share it
ATTRIBUTES = ["size", "objective", "mask_ratio", "steps", "clm_steps", "mlm_steps", "cpt_steps", "intermediate",
              "pretrain_seed", "family"]
SCORE_COLUMNS = ["source", "scale", "model", *ATTRIBUTES, "task_group", "dataset", "score", "ci", "n", "flag"]
RUN_COLUMNS = ["source", "scale", "model", *ATTRIBUTES, "task_group", "dataset", "grid", "lr", "seed", "validation",
               "test", "majority", "last_gain", "zero_shot", "protocol", "test_i", "test_w", "validation_i",
               "validation_w", "path"]
# test_i / validation_i: a run's per-instance scores (arrays); test_w / validation_w: what each instance weighs in the
# split's score (words for a tag accuracy, ``weights_i``), None where the score is the plain mean of the instances'.
# protocol: the epochs and sizes a run was trained with, where not the defaults (`run_tree.protocol_text`; "" where its
# results.json has no config).
GRIDS = ("default", "stability")
SOURCES = ("paper", "ours", REFERENCE, "encodeval", "encodeval-sample")


def size_label(size: str) -> str:
    return size.upper() if re.fullmatch(r"\d+[mb]", size) else size


def parse_model_id(model: str) -> dict:
    """Size, objective, masking ratio and step counts from a model id (`runs.ModelId`; results/README.md, "Model
    ids"). ``steps`` is what the evaluated checkpoint was trained for; ``clm_steps + mlm_steps == steps``;
    ``cpt_steps`` counts the continued-pretraining part; ``pretrain_seed`` is the id's ``-p{N}`` (0 when absent) and
    ``family`` the id without it; ``objective`` is ``clm``, ``mlm`` or ``clm+mlm`` (both phases present); beyond the
    paper ``mixed``, ``alternating``, ``ramp`` (a masking-ratio ramp, ``mlm40to20``: `mlmclm.schedule`; its
    ``mask_ratio`` missing, as it has no single ratio) or ``detour`` (the CLM detour in CPT: `BEYOND_OBJECTIVES`);
    or ``random`` for a run's step-0 checkpoint (its initial weights: the random-init control of its size, which
    stands for every objective since fine-tuning is always bidirectional). A `ResultFileError` (a `ValueError`) for an
    id that does not follow the naming.
    """
    m = ModelId.parse(model)
    if m.step == 0 and not m.cpt:
        return {"size": size_label(m.size), "objective": "random", "mask_ratio": pd.NA, "steps": 0,
                "clm_steps": 0, "mlm_steps": 0, "cpt_steps": 0, "intermediate": False, "pretrain_seed": m.seed,
                "family": str(m.family)}
    steps = m.step if m.step is not None else m.length
    clm = _clm_steps(m, steps)
    mlm = steps - clm
    return {
        "size": size_label(m.size),
        "objective": BEYOND_OBJECTIVES.get(m.kind if m.detour is None else "detour") or (
            "clm+mlm" if clm and mlm else ("clm" if clm else "mlm")),
        "mask_ratio": m.mask_ratio if m.mask_ratio is not None and mlm else pd.NA,
        "steps": steps,
        "clm_steps": clm,
        "mlm_steps": mlm,
        "cpt_steps": steps - m.steps if m.cpt else 0,
        "intermediate": m.step is not None,
        "pretrain_seed": m.seed,
        "family": str(m.family),
    }


# the objectives beyond the paper's schedules (issues 27 and 61), as ``objective`` names them; the paper's study views
# leave them out (`sequential`), and a ramp is never one of the masking-ratio sweep's constant-ratio runs
BEYOND_OBJECTIVES = {"mix": "mixed", "alt": "alternating", "ramp": "ramp", "detour": "detour"}


def _clm_steps(m: ModelId, steps: int) -> int:
    """How many of the first `steps` steps of model `m`'s lineage trained CLM (a mixed run's CLM rows counted as
    whole-batch steps: `schedule`'s ``clm_steps``; a detour's CLM phase after the decayed MLM run)."""
    if m.detour is not None:
        return min(max(steps - m.steps, 0), m.detour - m.steps)
    if m.kind in BEYOND_OBJECTIVES:
        return parse_objective(m.objective).clm_steps(min(m.steps, steps))
    return min(m.steps, steps) if m.objective == "clm" else 0


def sequential(df: pd.DataFrame) -> pd.Series:
    """Whether each row is a model of the paper's schedules: one objective, or CLM then MLM (not a mixed,
    alternating, ramp or detour model: `BEYOND_OBJECTIVES`)."""
    return df["objective"].isin(["clm", "mlm", "clm+mlm"])


def families(df: pd.DataFrame, models) -> set:
    """The families (``family``) of ``models`` (names), as ``df``'s rows give them; a name ``df`` does not hold is
    its own."""
    known = dict(zip(df["model"], df["family"]))
    return {known.get(m, m) for m in models}


def with_attributes(df: pd.DataFrame, recorded: dict | None = None) -> pd.DataFrame:
    """Add the `ATTRIBUTES` columns: a model's from ``recorded`` (model -> attributes, read from its run's records:
    `lineage`) where it is there, else parsed from its id; ids that do not follow the naming get missing values and
    are their own family. A recorded model's ``family`` (what it shares with the models that differ from it only in
    their seeds: `lineage.recorded`) is named by the model of that family with the lowest pretraining seed, so runs
    under free names pool as runs under ids do."""
    rows = []
    for model in df["model"].unique():
        try:
            rows.append({"model": model, **((recorded or {}).get(model) or parse_model_id(model))})
        except ValueError:
            rows.append({"model": model, "family": model})
    attrs = pd.DataFrame(rows, columns=["model", *ATTRIBUTES])
    mine = attrs["model"].isin(set(recorded or ()))
    first = attrs[mine].sort_values(["pretrain_seed", "model"]).drop_duplicates("family").set_index("family")["model"]
    attrs.loc[mine, "family"] = attrs.loc[mine, "family"].map(first)
    for col in ("mask_ratio", "steps", "clm_steps", "mlm_steps", "cpt_steps", "pretrain_seed"):
        attrs[col] = attrs[col].astype("Int64")
    attrs["intermediate"] = attrs["intermediate"].astype("boolean")
    return df.drop(columns=[c for c in ATTRIBUTES if c in df], errors="ignore").merge(attrs, on="model", how="left")


def output_subdir(source: str, scale: str) -> str:
    """Where a source's figures and tables go, under figures/ and results/tables/: the paper's at the top."""
    return "" if source == "paper" else (f"ours-{scale}" if source == "ours" else source)


def step_label(steps: int) -> str:
    """Steps as the paper prints them: 42000 -> "42K", 0 -> "0K" (a scale's own counts that are not thousands stay as
    they are). Run ids spell steps with a small k (`runs.steps_token`); both are `config.step_text`."""
    return step_text(int(steps), "K")


def size_key(size: str) -> tuple:
    """Sort key for sizes: the paper's by parameter count, a scale's own (``mini-s``, ``mini-m`` ...) by suffix."""
    m = re.fullmatch(r"(\d+)([MB])", str(size))
    if m:
        return (0, int(m[1]) * (1000 if m[2] == "B" else 1), "")
    suffixes = ("xxs", "xs", "s", "m", "l", "xl", "xxl")
    head, _, tail = str(size).rpartition("-")
    return (1, suffixes.index(tail) if tail in suffixes else len(suffixes), head + tail)


def ordered_sizes(sizes) -> list:
    return sorted(set(sizes), key=size_key)


def group_averages(df: pd.DataFrame) -> pd.DataFrame:
    """The task-group average rows (``dataset == "Avg"``) of scores or of a study view."""
    return df[df["dataset"] == AVG]


def dataset_order(datasets) -> list:
    """The paper's column order, then any other dataset (this repository's offline stand-ins) by name."""
    known = list(DATASETS.values())
    return sorted(set(datasets) - {AVG}, key=lambda d: (known.index(d) if d in known else len(known), d))
