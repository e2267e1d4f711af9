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
