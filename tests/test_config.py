"""The config system and atomic writes."""

from dataclasses import dataclass, field
from typing import Literal

import pytest

from mlmclm.config import load_config, to_yaml
from mlmclm.errors import ConfigError
from mlmclm.io import atomic_path, provenance, write_json


@dataclass
class Optim:
    lr: float = 5e-4
    betas: tuple[float, float] = (0.9, 0.95)


@dataclass
class Run:
    name: str = "x"
    steps: int = 10
    objective: Literal["mlm", "clm"] = "mlm"
    optim: Optim = field(default_factory=Optim)
    phases: list[tuple[str, int]] = field(default_factory=list)
    init: str | None = None

    def validate(self):
        if self.steps <= 0:
            raise ConfigError(f"steps must be positive, got {self.steps}")


def test_yaml_overrides_and_round_trip(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("name: a\noptim:\n  lr: 1e-3\nphases: [[clm, 3], [mlm, 7]]\n")
    cfg = load_config(Run, path, ["optim.lr=3e-4", "steps=20", "init=ckpt"])
    assert cfg.optim.lr == 3e-4 and cfg.steps == 20 and cfg.phases == [("clm", 3), ("mlm", 7)]
    assert cfg.optim.betas == (0.9, 0.95) and cfg.init == "ckpt"
    assert load_config(Run, to_yaml_file(tmp_path, cfg)) == cfg


def to_yaml_file(tmp_path, cfg):
    p = tmp_path / "resolved.yaml"
    p.write_text(to_yaml(cfg))
    return p


@pytest.mark.parametrize("data,overrides,match", [
    ({"optim": {"lrr": 1}}, [], r"unknown config key optim.lrr; did you mean optim.lr\?"),
    ({"stpes": 3}, [], r"did you mean steps\?"),
    ({}, ["steps=abc"], "steps must be an integer, got 'abc'"),
    ({}, ["objective=nsp"], "objective='nsp' is not allowed; choose one of mlm, clm"),
    ({}, ["steps=0"], "steps must be positive, got 0"),
    ({}, ["optim.betas=[0.9]"], "optim.betas must have 2 items"),
    ({}, ["steps"], "must look like dotted.key=value"),
])
def test_bad_configs_give_one_line(data, overrides, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_config(Run, data, overrides)
    assert "\n" not in str(err.value)


def test_malformed_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: malformed YAML \(line"):
        load_config(Run, bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(Run, tmp_path / "nope.yaml")


def test_atomic_writes_leave_nothing_half_written(tmp_path):
    target = tmp_path / "r" / "results.json"
    write_json(target, {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text().strip().startswith("{") and list(target.parent.iterdir()) == [target]
    with atomic_path(tmp_path / "ckpt", is_dir=True) as d:
        (d / "w").write_text("1")
    assert (tmp_path / "ckpt" / "w").read_text() == "1"


def test_provenance_has_commit_versions_hardware():
    p = provenance(attention_backend="sdpa")
    assert p["versions"]["torch"] and p["hardware"]["cpu_count"] and p["attention_backend"] == "sdpa"


def test_a_recipe_is_named_or_a_file(tmp_path):
    from mlmclm.config import RECIPES_DIR, recipe_path

    assert recipe_path("mini") == RECIPES_DIR / "mini.yaml"
    own = tmp_path / "mini"  # a file of the user's wins over the recipe of that name
    own.write_text("run_id: mine\n")
    assert recipe_path(own) == own
    with pytest.raises(ConfigError, match="'nosuch' is neither a YAML file nor a recipe; .* mini, paper, small, tiny"):
        recipe_path("nosuch")


def test_files_get_the_users_umask_and_are_fsynced_before_the_rename(tmp_path, monkeypatch):
    import os

    synced = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or fsync(fd))
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "a.json", {"a": 1})
        with atomic_path(tmp_path / "d", is_dir=True) as d:
            (d / "w").write_text("1")
        os.umask(0o027)
        write_json(tmp_path / "b.json", {"b": 1})
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"a.json": 0o644, "d": 0o755, "b.json": 0o640}  # not mkstemp's 0600 / mkdtemp's 0700
    assert len(synced) == 2  # each file, before it is renamed into place


def test_check_writable_names_the_folder(tmp_path):
    from mlmclm.io import check_writable

    check_writable(tmp_path / "new" / "folder")
    assert (tmp_path / "new" / "folder").is_dir() and not list((tmp_path / "new" / "folder").iterdir())
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=f"cannot write in {tmp_path / 'file' / 'runs'}: .*; choose a folder"):
        check_writable(tmp_path / "file" / "runs")


@pytest.mark.parametrize("overrides,match", [
    ({"num_hidden_layer": 6}, "unknown model field model.overrides.num_hidden_layer; did you mean "
                              "model.overrides.num_hidden_layers?"),
    ({"foo": 1}, "unknown model field model.overrides.foo; known fields: hidden_size, "),
    ({"vocab_size": 100}, r"model.overrides.vocab_size cannot be set: it is decided by the tokenizer's size"),
    ({"mask_token_id": 3}, r"model.overrides.mask_token_id cannot be set: it is decided by the tokenizer"),
    ({"hidden_size": 47}, r"hidden_size \(47\) must be divisible by num_attention_heads"),
])
def test_model_overrides_are_checked_like_every_key(overrides, match):
    from mlmclm.config import PretrainConfig

    with pytest.raises(ConfigError, match=match) as err:
        load_config(PretrainConfig, {"phases": [["clm", 10000]], "model": {"overrides": overrides}})
    assert "\n" not in str(err.value)
    cfg = load_config(PretrainConfig, {"phases": [["clm", 10000]], "model": {"overrides": {"num_hidden_layers": 3}}})
    assert cfg.model.overrides == {"num_hidden_layers": 3}


@pytest.mark.parametrize("override,match", [
    ("finetune.lrz=[1]", "unknown config key finetune.lrz; did you mean finetune.lrs?"),
    ("stability.sedes=[1]", "unknown config key stability.sedes; did you mean stability.seeds?"),
    ("finetune=3", "finetune must be a mapping of fine-tuning fields"),
])
def test_a_scales_grid_fields_are_named_in_full(override, match):
    from mlmclm.config import scale_config

    with pytest.raises(ConfigError, match=match):
        scale_config("tiny", [override])


def test_a_dataset_sets_its_own_protocol_and_the_rest_keep_the_default():
    """`finetune.per_dataset`: a dataset's lrs, seeds, epochs, sizes on top of the scale's default; the resolved
    protocol holds no per_dataset (a run records what it was computed with)."""
    from mlmclm.config import finetune_config

    cfg = finetune_config("long", ["per_dataset.multiemo_sentiment.lrs=[1e-4, 1e-3]",
                                   "per_dataset.multiemo_sentiment.seeds=[0, 1, 2, 3, 4, 5, 6, 7]",
                                   "per_dataset.multiemo_sentiment.max_eval=4000"])
    sc, tc = cfg.for_dataset("multiemo_sentiment"), cfg.for_dataset("brown_upos")
    assert (sc.lrs, sc.seeds, sc.max_eval, sc.epochs) == ([1e-4, 1e-3], list(range(8)), 4000, cfg.epochs)
    assert (tc.lrs, tc.seeds, tc.max_eval) == (cfg.lrs, cfg.seeds, cfg.max_eval)
    assert sc.per_dataset == tc.per_dataset == {} and cfg.per_dataset["multiemo_sentiment"]["max_eval"] == 4000


@pytest.mark.parametrize("override,match", [
    ("finetune.per_dataset.multiemo_sentiment.qa_stride=4", "per_dataset.multiemo_sentiment.qa_stride cannot be "
                                                            "set per dataset; choose from lrs, seeds, epochs"),
    ("finetune.per_dataset.multiemo_sentiment.lrs=[-1]", "per_dataset.multiemo_sentiment: lrs must be positive"),
    ("finetune.per_dataset.multiemo_sentiment.epochs=x", "per_dataset.multiemo_sentiment.epochs must be an integer"),
    ("finetune.per_dataset.multiemo_sentiment=3", "per_dataset.multiemo_sentiment must be a mapping"),
])
def test_a_bad_per_dataset_protocol_is_one_line(override, match):
    from mlmclm.config import scale_config

    with pytest.raises(ConfigError, match=match) as err:
        scale_config("tiny", [override])
    assert "\n" not in str(err.value)
