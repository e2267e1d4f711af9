"""A model's attributes come from its run's records (`analysis.lineage`): the committed runs read as their ids say,
and a run under a free name is analysed from its config alone."""

from pathlib import Path

import pandas as pd
import pytest

from helpers import write_run
from mlmclm.analysis.ids import ATTRIBUTES, parse_model_id
from mlmclm.analysis.run_tree import load_pretrain_logs, load_run_tree

RUNS = Path(__file__).resolve().parents[1] / "results" / "runs"


@pytest.mark.parametrize("scale", ["mini", "long", "longer", "tiny"])
def test_every_committed_model_reads_from_its_records_what_its_id_says(scale):
    if not (RUNS / scale).is_dir():
        pytest.skip(f"no results/runs/{scale} here")
    runs = load_run_tree(RUNS / scale, "ours", scale)
    recorded = runs.drop_duplicates("model").set_index("model")[ATTRIBUTES]
    by_id = pd.DataFrame([parse_model_id(m) for m in recorded.index], index=recorded.index)[ATTRIBUTES]
    assert recorded.astype(str).equals(by_id.astype(str))
    configs = {p.parent.name for p in (RUNS / scale).glob("*/config.yaml")}
    assert configs and all(m in configs or m.rsplit("-", 1)[0] in configs for m in recorded.index)


def _config(root: Path, run: str, phases: str, init: str = "{kind: scratch}", seed: int = 0) -> None:
    (root / run).mkdir(parents=True, exist_ok=True)
    (root / run / "config.yaml").write_text(
        f"run_id: {run}\nscale: tiny\nphases: {phases}\nseed: {seed}\nmodel: {{size: tiny-m}}\ninit: {init}\n"
        "optim: {warmup_steps: 2, decay_steps: 2}\n")


def _result(root: Path, model: str, run: str, step: int) -> None:
    write_run(root, model, "TC", "toy_pos", 1e-3, 0, 0.5, 0.5,
              meta={"checkpoint": f"checkpoints/tiny/{run}/step_{step:06d}/hf", "step": step})


def test_runs_under_free_names_are_analysed_from_their_configs(tmp_path):
    _config(tmp_path, "two-phases", "[[clm, 30], [mlm40, 12]]", seed=2)
    _config(tmp_path, "its-cpt", "[[mlm30, 10]]", "{kind: run, path: checkpoints/tiny/two-phases, step: 42}", seed=2)
    _config(tmp_path, "plain-mlm", "[[mlm40, 40]]")
    _config(tmp_path, "a-detour", "[[clm, 5], [mlm40, 5]]", "{kind: run, path: checkpoints/tiny/plain-mlm, step: 40}")
    _config(tmp_path, "mixed", "[[mix1clm3mlm40, 40]]")
    for model, run, step in [("its-cpt", "its-cpt", 10), ("early", "two-phases", 20), ("cpt-start", "its-cpt", 0),
                             ("a-detour", "a-detour", 10), ("init", "plain-mlm", 0), ("mixed", "mixed", 40)]:
        _result(tmp_path, model, run, step)
    got = load_run_tree(tmp_path, "ours", "tiny").set_index("model")[ATTRIBUTES].astype(object)
    want = {  # size, objective, mask_ratio, steps, clm_steps, mlm_steps, cpt_steps, intermediate, pretrain_seed
        "its-cpt": ["tiny-m", "clm+mlm", 30, 52, 30, 22, 10, False, 2],
        "early": ["tiny-m", "clm", pd.NA, 20, 20, 0, 0, True, 2],
        "cpt-start": ["tiny-m", "clm+mlm", 30, 42, 30, 12, 0, True, 2],
        "a-detour": ["tiny-m", "detour", 40, 50, 5, 45, 10, False, 0],
        "init": ["tiny-m", "random", pd.NA, 0, 0, 0, 0, False, 0],
        "mixed": ["tiny-m", "mixed", 40, 40, 10, 30, 0, False, 0],
    }
    for model, values in want.items():
        assert [None if pd.isna(v) else v for v in got.loc[model]] == [None if v is pd.NA else v for v in values], model
    logs = load_pretrain_logs(tmp_path)  # no pretrain.csv: an empty frame with the attribute columns
    assert set(ATTRIBUTES) <= set(logs.columns)


def test_a_model_without_records_keeps_its_ids_attributes(tmp_path):
    _result(tmp_path, "tiny-m-clm-42-20", "tiny-m-clm-42", 20)
    got = load_run_tree(tmp_path, "ours", "tiny").iloc[0]
    assert (got["objective"], got["steps"], bool(got["intermediate"])) == ("clm", 20, True)
