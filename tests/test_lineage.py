"""A model's attributes come from its run's records (`analysis.loading.lineage`): the committed runs read as their
ids say (their pretraining-seed families too), a run under a free name is analysed from its config alone (runs that
differ only in their seeds one family), and a record that is damaged or disagrees with itself is
refused in one line naming its file, never read as another model or from its name (issue 46, item 1)."""

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from helpers import write_run
from mlmclm.analysis.loading import compute, results
from mlmclm.analysis.loading.ids import ATTRIBUTES, parse_model_id
from mlmclm.analysis.loading.run_tree import load_pretrain_logs, load_run_tree, run_parameters
from mlmclm.errors import ResultFileError

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


def test_a_masking_ratio_ramp_run_loads_as_its_own_objective_without_a_single_ratio(tmp_path):
    """A ramp (`mlm40to20`) is never one of the masking-ratio sweep's constant-ratio MLM runs: objective ``ramp``,
    no ``mask_ratio``, every step an MLM step; its records and its id agree, and its FLOPs count MLM at its mean
    ratio over the steps it trained (issue 61, item 3)."""
    run = "tiny-m-mlm40to20-40-p1"
    _config(tmp_path, run, "[[mlm40to20, 40]]", seed=1)
    for model, step in [(run, 40), (f"{run}-20", 20), (f"{run}-0", 0)]:
        _result(tmp_path, model, run, step)
    got = load_run_tree(tmp_path, "ours", "tiny").drop_duplicates("model").set_index("model")[ATTRIBUTES]
    by_id = pd.DataFrame([parse_model_id(m) for m in got.index], index=got.index)[ATTRIBUTES]
    assert got[ATTRIBUTES[:-1]].astype(str).equals(by_id[ATTRIBUTES[:-1]].astype(str))  # the family aside: its name
    want = {  # objective, mask_ratio, steps, clm_steps, mlm_steps, intermediate
        run: ["ramp", None, 40, 0, 40, False], f"{run}-20": ["ramp", None, 20, 0, 20, True],
        f"{run}-0": ["random", None, 0, 0, 0, False]}
    for model, values in want.items():
        row = got.loc[model, ["objective", "mask_ratio", "steps", "clm_steps", "mlm_steps", "intermediate"]]
        assert [None if pd.isna(v) else v for v in row] == values, model
    assert not results.sequential(got.reset_index()).any() and set(got["pretrain_seed"]) == {1}
    # FLOPs: step i of 40 masks 40 - 20 i / 39 percent, so the first s steps average 40 - 10 (s - 1) / 39
    assert compute.ramp_mask_ratio(run, 40) == pytest.approx(30.0)
    assert compute.ramp_mask_ratio(f"{run}-20", 20) == pytest.approx(40 - 10 * 19 / 39)
    assert compute.ramp_mask_ratio("tiny-m-mlm40to20-dec40-mlm20-50", 50) == pytest.approx((40 * 30 + 10 * 20) / 50)
    with pytest.raises(ResultFileError, match="names no masking-ratio ramp"):
        compute.ramp_mask_ratio("tiny-m-mlm40-40", 40)
    arch = {"tiny-m": {"embeddings": 1000, "body": 5000, "output_layer": 1000, "tokens_per_step": 256}}
    flops = compute.with_flops(got.reset_index()[lambda d: d["objective"] == "ramp"], arch).set_index("model")
    assert flops.loc[run, "flops"] == pytest.approx(compute.checkpoint_flops(arch["tiny-m"], 0, 40, 30.0)[0])
    assert flops.loc[run, "flops"] == pytest.approx(6 * 256 * 40 * (1000 + 5000 + 0.3 * 1000))


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
    got = got[ATTRIBUTES[:-1]]  # the family: test_runs_under_free_names_that_differ_only_in_their_seeds_are_one_family
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


def test_runs_under_free_names_that_differ_only_in_their_seeds_are_one_family(tmp_path):
    """A pretraining-seed family is formed from the models' records, not their names: checkpoints of runs whose
    configs differ only in their seeds (and names, folders, kept checkpoints), or CPTs of such runs, are one family,
    named by its seed-0 model and pooled as one; another recipe or another checkpoint is a family of its own."""
    _config(tmp_path, "first-try", "[[clm, 30], [mlm40, 10]]")
    _config(tmp_path, "second-try", "[[clm, 30], [mlm40, 10]]", seed=1)
    _config(tmp_path, "faster", "[[clm, 30], [mlm40, 10]]")
    (tmp_path / "faster" / "config.yaml").write_text(
        (tmp_path / "faster" / "config.yaml").read_text().replace("optim: {", "optim: {lr: 0.01, "))
    for run, parent, seed in (("more-a", "first-try", 0), ("more-b", "second-try", 1)):
        _config(tmp_path, run, "[[mlm40, 10]]", f"{{kind: run, path: checkpoints/tiny/{parent}, step: 40}}", seed)
    for model, run, step in [("a", "first-try", 40), ("b", "second-try", 40), ("fast", "faster", 40),
                             ("b-early", "second-try", 20), ("a-more", "more-a", 10), ("b-more", "more-b", 10)]:
        _result(tmp_path, model, run, step)
    runs = load_run_tree(tmp_path, "ours", "tiny")
    family = runs.drop_duplicates("model").set_index("model")["family"].to_dict()
    assert family == {"a": "a", "b": "a", "fast": "fast", "b-early": "b-early", "a-more": "a-more", "b-more": "a-more"}
    pooled = results.pool_pretraining_seeds(results.aggregate(runs)).drop_duplicates("model")
    assert pooled.set_index("model")["pretrain_seeds"].to_dict() == {"a": 2, "fast": 1, "b-early": 1, "a-more": 2}


def test_a_model_without_records_keeps_its_ids_attributes(tmp_path):
    _result(tmp_path, "tiny-m-clm-42-20", "tiny-m-clm-42", 20)
    got = load_run_tree(tmp_path, "ours", "tiny").iloc[0]
    assert (got["objective"], got["steps"], bool(got["intermediate"])) == ("clm", 20, True)


# ---- a damaged or disagreeing record is refused in one line naming its file (issue 46, item 1) ----
def _meta(root: Path, run: str, identity: str | None = None, text: str | None = None) -> None:
    """The run's meta.json: with the identity of its config.yaml as written (`identity` or `text`: another's)."""
    config = (root / run / "config.yaml").read_text()
    ident = identity or hashlib.sha256((text or config).encode()).hexdigest()[:16]
    (root / run / "meta.json").write_text(json.dumps({"run_id": run, "identity": ident, "status": "complete"}))


def _refused(tmp_path: Path, *says: str, load=None) -> str:
    """The one-line `ResultFileError` that reading the tree gives; it says each of `says`."""
    with pytest.raises(ResultFileError) as e:
        (load or (lambda: load_run_tree(tmp_path, "ours", "tiny")))()
    message = str(e.value)
    assert "\n" not in message and all(s in message for s in says), message
    return message


@pytest.mark.parametrize("parent", ["gone", "tiny-m-clm-42"])
def test_a_cpt_whose_parents_record_is_gone_is_refused_not_read_from_its_name(tmp_path, parent):
    child = "its-cpt" if parent == "gone" else "tiny-m-clm-dec42-mlm30-52"  # an id would be parsed as a fallback
    _config(tmp_path, child, "[[mlm30, 10]]", f"{{kind: run, path: checkpoints/tiny/{parent}, step: 42}}")
    _result(tmp_path, child, child, 10)
    _refused(tmp_path, str(tmp_path / child / "config.yaml"), str(tmp_path / parent / "config.yaml"), "restore")


def test_a_loop_of_init_paths_is_refused(tmp_path):
    _config(tmp_path, "a", "[[mlm40, 10]]", "{kind: run, path: checkpoints/tiny/b}")
    _config(tmp_path, "b", "[[mlm40, 10]]", "{kind: run, path: checkpoints/tiny/a}")
    _result(tmp_path, "a", "a", 10)
    _refused(tmp_path, "config.yaml", "loop", "a -> b -> a")


def test_a_config_edited_after_training_is_refused_and_so_are_its_cpt_children(tmp_path):
    _config(tmp_path, "base", "[[clm, 40]]")
    _meta(tmp_path, "base", text="run_id: base\nphases: [[mlm40, 40]]\n")  # trained as another config
    _config(tmp_path, "cpt", "[[mlm40, 10]]", "{kind: run, path: checkpoints/tiny/base}")
    _meta(tmp_path, "cpt")
    _result(tmp_path, "cpt", "cpt", 10)
    _refused(tmp_path, str(tmp_path / "base" / "config.yaml"), "meta.json", "edited")
    _config(tmp_path, "base", "[[clm, 40]]")
    _meta(tmp_path, "base")  # its own identity, and one without any (written before identities), agree
    assert load_run_tree(tmp_path, "ours", "tiny")["objective"].tolist() == ["clm+mlm"]
    (tmp_path / "base" / "meta.json").write_text(json.dumps({"run_id": "base", "status": "complete"}))
    assert load_run_tree(tmp_path, "ours", "tiny")["objective"].tolist() == ["clm+mlm"]


def test_a_meta_step_that_disagrees_with_its_checkpoint_or_schedule_is_refused(tmp_path):
    _config(tmp_path, "clm-only", "[[clm, 40]]")
    path = write_run(tmp_path, "early", "TC", "toy_pos", 1e-3, 0, 0.5, 0.5,
                     meta={"checkpoint": "checkpoints/tiny/clm-only/step_000020/hf", "step": 30})
    _refused(tmp_path, str(path), "step 30", "step_000020")
    path.unlink()
    path = write_run(tmp_path, "late", "TC", "toy_pos", 1e-3, 0, 0.5, 0.5,  # read as 'clm+mlm, 54 MLM steps'
                     meta={"checkpoint": "checkpoints/tiny/clm-only/step_000094/hf", "step": 94})
    _refused(tmp_path, str(path), "94", "40", str(tmp_path / "clm-only" / "config.yaml"))


def test_results_of_two_checkpoints_under_one_model_are_refused(tmp_path):
    _config(tmp_path, "plain", "[[clm, 40]]")
    write_run(tmp_path, "plain", "TC", "toy_pos", 1e-3, 0, 0.5, 0.5,
              meta={"checkpoint": "checkpoints/tiny/plain/step_000040/hf", "step": 40})
    other = write_run(tmp_path, "plain", "TC", "toy_pos", 1e-3, 1, 0.5, 0.5,
                      meta={"checkpoint": "checkpoints/tiny/plain/step_000020/hf", "step": 20})
    _refused(tmp_path, "plain", "step 20", "step 40", "one checkpoint")
    assert str(other) in _refused(tmp_path)


def test_a_record_that_is_not_yaml_or_json_is_one_line_naming_it(tmp_path):
    _config(tmp_path, "run", "[[clm, 40]]")
    _result(tmp_path, "run", "run", 40)
    (tmp_path / "run" / "meta.json").write_text("{\"identity\": ")
    _refused(tmp_path, str(tmp_path / "run" / "meta.json"), "JSON")
    (tmp_path / "run" / "meta.json").unlink()
    (tmp_path / "run" / "pretrain.csv").write_text("step,loss\n1,2.0\n")
    for text in ("phases: [[clm, 40]\n", "- a list\n", ""):
        (tmp_path / "run" / "config.yaml").write_text(text)
        _refused(tmp_path, str(tmp_path / "run" / "config.yaml"))
        _refused(tmp_path, str(tmp_path / "run" / "config.yaml"), load=lambda: load_pretrain_logs(tmp_path))


def test_every_reader_of_records_refuses_a_damaged_one(tmp_path):
    """The notebooks' loader (`results.load`), the pretraining logs and the parameter counts read records through the
    same reader."""
    runs = tmp_path / "results" / "runs" / "tiny"
    _config(runs, "run", "[[clm, 40]]")
    _meta(runs, "run", identity="0" * 16)
    (runs / "run" / "pretrain.csv").write_text("step,loss\n1,2.0\n")
    _result(runs, "run", "run", 40)
    for load in (lambda: results.load(tmp_path / "results", sources=["ours"], scale="tiny"),
                 lambda: load_pretrain_logs(runs), lambda: run_parameters(runs)):
        _refused(tmp_path, str(runs / "run" / "config.yaml"), "edited", load=load)
