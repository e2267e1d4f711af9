"""A model id round-trips (`runs.ModelId`): every id of every scale's plan and every run folder committed under
results/runs/ parses back to itself; a CPT run's lineage comes from its id; and the run layout is one function."""

from pathlib import Path

import pytest

from mlmclm import studies
from mlmclm.config import PretrainConfig, load_config, scale_config, scale_names
from helpers import REPO as ROOT
from mlmclm.paths import Paths, grid_root, run_folder
from mlmclm.runs import ModelId, id_of


@pytest.mark.parametrize("scale", scale_names())
def test_every_id_of_every_plan_parses_back_to_itself(scale):
    plan = studies.build_plan(scale_config(scale))
    ids = [r.id for r in plan.runs.values()] + [e.model for e in plan.evaluations.values()]
    for model in ids:
        assert ModelId.parse(str(model)) == model, str(model)
        assert str(ModelId.parse(str(model))) == str(model)
    for r in plan.runs.values():  # a CPT run's parent (or its root) continues the decayed run its id names
        if r.id.cpt:
            root = r if r.parent == str(r.id.continues) else plan.runs[r.parent]
            assert root.parent == str(r.id.continues) and root.parent_step == r.id.steps


def test_every_committed_run_folder_parses_back_to_itself():
    runs = ROOT / "results" / "runs"
    folders = [p for grid in ("default", "stability") for scale in scale_names()
               for p in sorted((grid_root(runs, grid) / scale).glob("*")) if p.is_dir()]
    assert len(folders) > 20
    for folder in folders:
        assert str(ModelId.parse(folder.name)) == folder.name


@pytest.mark.parametrize("text, fields", [
    ("mini-xs-clm-2200-mlm40-9240", ("mini-xs", "clm", 2200, "mlm40", 9240, False, 0, None)),
    ("mini-xs-clm-9240-2200", ("mini-xs", "clm", 9240, None, None, False, 0, 2200)),
    ("mini-xs-clm-9240-p1", ("mini-xs", "clm", 9240, None, None, False, 1, None)),
    ("mini-xs-clm-dec9240-mlm40-11440-p1", ("mini-xs", "clm", 9240, "mlm40", 11440, True, 1, None)),
    ("mini-xs-mlm40-9240-0", ("mini-xs", "mlm40", 9240, None, None, False, 0, 0)),
    ("610m-mlm40-42k-1000", ("610m", "mlm40", 42000, None, None, False, 0, 1000)),
    ("mini-xs-mix1clm15mlm40-4620", ("mini-xs", "mix1clm15mlm40", 4620, None, None, False, 0, None)),
    ("mini-xs-alt1clm1mlm40-4620-p1-2310", ("mini-xs", "alt1clm1mlm40", 4620, None, None, False, 1, 2310)),
    ("twin-mlm40to20-21k", ("twin", "mlm40to20", 21000, None, None, False, 0, None)),
    ("twin-mlm40to20-21k-p4-2500", ("twin", "mlm40to20", 21000, None, None, False, 4, 2500)),
    ("mini-xs-mlm40-dec4620-clm-5830-mlm40-7040-p1", ("mini-xs", "mlm40", 4620, "mlm40", 7040, True, 1, None, 5830)),
    ("smollm2-135m-mlm40-22k", ("smollm2-135m", "mlm40", 22000, None, None, False, 0, None)),
])
def test_a_model_id_writes_and_reads_its_parts(text, fields):
    model = ModelId.parse(text)
    assert (model.size, model.objective, model.steps, model.then, model.total, model.cpt, model.seed,
            model.step, model.detour)[:len(fields)] == fields
    assert str(model) == text and str(ModelId(*fields)) == text


def test_lineage_and_seed_family_come_from_the_id():
    cpt = ModelId.parse("mini-xs-clm-dec9240-mlm40-11440-p1")
    assert str(cpt.continues) == "mini-xs-clm-9240-p1" and str(cpt.family) == "mini-xs-clm-dec9240-mlm40-11440"
    assert ModelId.parse("mini-xs-clm-9240").continues is None
    assert str(cpt.at(2200)) == "mini-xs-clm-dec9240-mlm40-11440-p1-2200" and str(cpt.at(2200).run) == str(cpt)
    assert (cpt.length, cpt.mask_ratio, ModelId.parse("mini-xs-clm-9240").mask_ratio) == (11440, 40, None)


def test_the_run_layout():
    assert Paths(Path("/w")) == Paths(Path("/w"), Path("/w/results/runs"), Path("/w/checkpoints"), Path("/w/data"))
    paths = Paths(Path("/"), Path("/r"), Path("/c"), Path("/d"))
    assert paths.run("long", ModelId.parse("mini-xs-clm-4620")) == Path("/r/long/mini-xs-clm-4620")
    stability = Path("/r/stability/long/m")
    assert paths.run("long", "m", "stability") == stability == run_folder(grid_root("/r", "stability"), "long", "m")
    assert paths.run("small", "m", "reference") == Path("/r/reference/small/m")
    assert paths.checkpoints_of("long", "m") == Path("/c/long/m")


def test_mixed_runs_and_the_clm_detour_name_their_kind_ratio_and_lineage():
    mixed = ModelId.parse("mini-xs-mix1clm15mlm40-4620-p1")
    assert (mixed.kind, mixed.mask_ratio, mixed.continues, str(mixed.family)) == (
        "mix", 40, None, "mini-xs-mix1clm15mlm40-4620")
    assert ModelId.parse("mini-xs-alt2clm6mlm30-4620").kind == "alt"
    detour = ModelId.parse("mini-xs-mlm40-dec4620-clm-5830-mlm40-7040-p1")
    assert (detour.kind, detour.mask_ratio, detour.length, detour.cpt) == ("mlm", 40, 7040, True)
    assert str(detour.continues) == "mini-xs-mlm40-4620-p1" and str(detour.at(0).run) == str(detour)
    assert str(ModelId.parse("610m-mlm40-dec42k-clm-53k-mlm40-64k").continues) == "610m-mlm40-42k"


def test_a_masking_ratio_ramp_run_is_its_own_kind_without_a_single_ratio():
    """A ramp (`mlm40to20`) is never read as one of the masking-ratio sweep's constant-ratio MLM runs."""
    ramp = ModelId.parse("twin-mlm40to20-21k-p4")
    assert (ramp.kind, ramp.mask_ratio, ramp.length, ramp.continues) == ("ramp", None, 21000, None)
    assert str(ramp.family) == "twin-mlm40to20-21k" and str(ramp.at(2500)) == "twin-mlm40to20-21k-p4-2500"
    assert (ModelId.parse("twin-mlm15to30-21k").kind, ModelId.parse("twin-mlm40-21k").mask_ratio) == ("ramp", 40)


def test_a_ramp_runs_config_gives_its_id():
    cfg = load_config(PretrainConfig, {"run_id": "r", "scale": "twin", "phases": [["mlm40to20", 21000]], "seed": 4,
                                       "model": {"size": "twin"}, "optim": {"warmup_steps": 10, "decay_steps": 10}})
    assert str(id_of(cfg)) == "twin-mlm40to20-21k-p4" and ModelId.parse(str(id_of(cfg))) == id_of(cfg)


@pytest.mark.parametrize("text", [
    "mini-xs-mlm40-dec9240-clm-1100-mlm40-2200",  # read by the lazy size as the biphasic run of "mini-xs-mlm40-dec9240"
    "mini-xs-mlm40-dec4620-clm-7040-mlm40-7040",  # a detour must leave steps to its MLM phase
    "mini-xs-mlm40-4620-clm-5830-mlm40-7040",     # a detour continues a decayed run ("dec")
    "mini-xs-mix1clm15mlm40-1100-mlm40-4620",     # a second phase from scratch follows CLM only
])
def test_ids_that_break_the_forms_are_refused(text):
    with pytest.raises(ValueError):
        ModelId.parse(text)


def test_every_committed_runs_config_gives_back_its_folder_name():
    """A run's identity is its config: `id_of` of each committed config.yaml is its folder's name."""
    from mlmclm.config import PretrainConfig, load_config
    from mlmclm.runs import id_of

    configs = sorted((ROOT / "results" / "runs").glob("**/config.yaml"))
    assert len(configs) >= 30  # 35 committed (mini, long, longer, small)
    assert [str(id_of(load_config(PretrainConfig, c))) for c in configs] == [c.parent.name for c in configs]


@pytest.mark.parametrize("scale", ["tiny", "mini", "long", "longer", "small", "paper"])
def test_every_planned_runs_config_gives_back_its_id(scale, tmp_path):
    from mlmclm import studies
    from mlmclm.config import scale_config
    from mlmclm.runs import id_of

    plan = studies.build_plan(scale_config(scale))
    paths = studies.Paths(ROOT, results=tmp_path / "runs", checkpoints=tmp_path / "ckpt")
    for run in plan.runs.values():
        if not run.decoder:  # a decoder pretrained elsewhere has no id form of ours
            assert str(id_of(studies.run_config(plan, run, paths))) == run.run_id
