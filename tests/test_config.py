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
    micro: int | Literal["auto"] = 4

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
    ({}, ["micro=big"], "micro must be an integer or 'auto', got 'big'"),
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
    with pytest.raises(ConfigError, match="'nosuch' is neither a YAML file nor a recipe; .* mini, paper, paper-1b, small, tiny"):
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
    assert not (tmp_path / "new").exists()  # checked by writing a file there; nothing is left behind
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=f"cannot write in {tmp_path / 'file' / 'runs'}: .*; choose a folder"):
        check_writable(tmp_path / "file" / "runs")


def test_check_writable_survives_another_check_removing_the_new_folder(tmp_path, monkeypatch):
    """Two commands started together check the same new folder: one's check removes what it made while the other
    writes its probe file there (a study run once failed so). The check makes it again and still leaves nothing."""
    import shutil
    import tempfile

    from mlmclm.io import check_writable

    real, calls = tempfile.TemporaryFile, []

    def raced(*args, dir=None, **kwargs):
        calls.append(dir)
        if len(calls) == 1:  # the other process's check removes the folders it made, ours among them
            shutil.rmtree(tmp_path / "new")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", raced)
    check_writable(tmp_path / "new" / "runs")
    assert len(calls) == 2 and not (tmp_path / "new").exists()


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


def test_the_config_checks_a_model_as_mlmclmconfig_does_without_importing_it():
    """`config` checks model fields and shapes by `sizes` (torch-free): its field list is MlmClmConfig's, and a
    shape `sizes` refuses MlmClmConfig refuses with the same line."""
    import inspect

    from mlmclm import sizes
    from mlmclm.models.configuration import MlmClmConfig

    params = [n for n in inspect.signature(MlmClmConfig.__init__).parameters if n not in ("self", "kwargs")]
    assert list(sizes.FIELDS) == params
    for bad in ({"num_key_value_heads": 3}, {"hidden_size": 47}, {"attention_backend": "x"}, {"vocab_size": 0},
                {"num_key_value_heads": 0}, {"head_dim": 15, "hidden_size": 60}):
        with pytest.raises(ConfigError) as ours:
            sizes.shape("tiny", **bad)
        with pytest.raises(ConfigError) as theirs:
            MlmClmConfig(**{**sizes.SIZES["tiny"], **bad})
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ConfigError, match="rope_theta must be a number"):
        sizes.shape("tiny", rope_theta="x")
    with pytest.raises(ValueError):
        MlmClmConfig(**{**sizes.SIZES["tiny"], "rope_theta": "x"})
    assert sizes.shape("tiny", head_dim=16) == {**sizes.SIZES["tiny"], "head_dim": 16}


@pytest.mark.parametrize("override,match", [
    ("finetune.lrz=[1]", "unknown config key finetune.lrz; did you mean finetune.lrs?"),
    ("stability.sedes=[1]", "unknown config key stability.sedes; did you mean stability.seeds?"),
    ("finetune=3", "finetune must be a mapping of config keys, got 3"),
])
def test_a_scales_grid_fields_are_named_in_full(override, match):
    from mlmclm.config import scale_config

    with pytest.raises(ConfigError, match=match):
        scale_config("tiny", [override])


# ---- names and numbers, validated once, with the reason ----
from mlmclm.config import FinetuneConfig, PretrainConfig, ScaleConfig, check_name, scale_config  # noqa: E402


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "-rf", "", "a b", "x/../y", "~"])
@pytest.mark.parametrize("cls, key", [(PretrainConfig, "run_id"), (PretrainConfig, "scale"),
                                      (FinetuneConfig, "scale"), (ScaleConfig, "scale")])
def test_names_that_become_folders_are_one_safe_component(cls, key, name):
    with pytest.raises(ConfigError, match=f"{key} {name!r} must be one folder name: letters, digits") as err:
        load_config(cls, {key: name})
    assert "\n" not in str(err.value)


def test_good_names_pass_and_a_scale_is_one_of_the_shipped_ones():
    for name in ("mini-m-clm-840-p1", "all-minilm-l6-v2", "SmolLM2-135M-Instruct", "t", "1b", "a.b_c"):
        assert check_name(name, "x") == name
    with pytest.raises(ConfigError, match=r"unknown scale '\.\./scales/tiny'; choose one of"):
        scale_config("../scales/tiny")


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("cls, data, match", [
    (PretrainConfig, {"optim": {"lr": NAN}}, r"optim.lr must be a finite number, got nan"),
    (PretrainConfig, {"optim": {"lr": "inf"}}, r"optim.lr must be a finite number, got inf"),
    (PretrainConfig, {"optim": {"lr": -INF}}, r"optim.lr must be a finite number"),
    (PretrainConfig, {"optim": {"betas": [0.9, 1.0]}}, r"optim.betas\[1\] must be in \[0, 1\), got 1.0: a moment's"),
    (PretrainConfig, {"optim": {"betas": [-0.1, 0.9]}}, r"optim.betas\[0\] must be in \[0, 1\), got -0.1"),
    (PretrainConfig, {"optim": {"eps": -1e-8}}, r"optim.eps must be in \(0, inf\), got -1e-08: it keeps"),
    (PretrainConfig, {"optim": {"eps": 0}}, r"optim.eps must be in \(0, inf\), got 0.0"),
    (PretrainConfig, {"optim": {"weight_decay": -0.1}}, r"optim.weight_decay must be in \[0, inf\), got -0.1"),
    (PretrainConfig, {"optim": {"grad_clip": -1}}, r"optim.grad_clip must be in \[0, inf\)"),
    (PretrainConfig, {"optim": {"final_lr_ratio": 2}}, r"optim.final_lr_ratio must be in \[0, 1\], got 2.0"),
    (PretrainConfig, {"seed": -1}, r"seed must be in \[0, 4294967296\), got -1: a seed is a non-negative 32-bit"),
    (PretrainConfig, {"seed": 2 ** 70}, r"seed must be in \[0, 4294967296\), got 1180591620717411303424"),
    (PretrainConfig, {"data": {"seed": -3}}, r"data.seed must be in \[0, 4294967296\)"),
    (PretrainConfig, {"data": {"offset": -1}}, r"data.offset must be in \[0, inf\), got -1: the first sample"),
    (PretrainConfig, {"data": {"max_chars": 0}}, r"data.max_chars must be in \[1, inf\), got 0: a cap"),
    (PretrainConfig, {"data": {"max_tokens": -5}}, r"data.max_tokens must be in \[1, inf\)"),
    (PretrainConfig, {"data": {"seq_len": 0}}, r"data.seq_len must be at least 2, got 0"),
    (PretrainConfig, {"init": {"kind": "run", "path": "x", "step": -1}}, r"init.step must be in \[0, inf\)"),
    (FinetuneConfig, {"lrs": [1e-3, NAN]}, r"lrs\[1\] must be a finite number, got nan"),
    (FinetuneConfig, {"seeds": [0, -1]}, r"seeds\[1\] must be in \[0, 4294967296\)"),
    (FinetuneConfig, {"optim": {"betas": [1, 0.9]}}, r"optim.betas\[0\] must be in \[0, 1\), got 1.0"),
    (FinetuneConfig, {"optim": {"warmup_ratio": 1.5}}, r"optim.warmup_ratio must be in \[0, 1\], got 1.5: a fraction"),
    (FinetuneConfig, {"optim": {"eps": -1}}, r"optim.eps must be in \(0, inf\)"),
    (FinetuneConfig, {"ir_logit_scale": INF}, r"ir_logit_scale must be a finite number"),
    (ScaleConfig, {"cpt_warmup_k": -1}, r"cpt_warmup_k must be in \[0, inf\)"),
])
def test_every_number_has_its_range_and_the_message_says_why(cls, data, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_config(cls, data)
    assert "\n" not in str(err.value)


def test_the_shipped_scales_and_recipes_pass_the_ranges():
    from mlmclm.config import RECIPES_DIR, scale_names

    for name in scale_names():
        scale_config(name)
    for recipe in RECIPES_DIR.glob("*.yaml"):
        load_config(PretrainConfig, recipe)


def test_empty_folder_and_non_utf8_config_files_are_one_line(tmp_path):
    empty = tmp_path / "empty.yaml"
    for text in ("", "# only a comment\n", "\n\n"):
        empty.write_text(text)
        with pytest.raises(ConfigError, match="empty.yaml: the config is empty; give at least"):
            load_config(Run, empty)
    with pytest.raises(ConfigError, match=f"config file {tmp_path} is a folder; name a YAML file"):
        load_config(Run, tmp_path)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin.yaml: not UTF-8 text \(byte 9\); save it as UTF-8"):
        load_config(Run, latin)


def test_leftovers_of_killed_writers_are_removed_at_the_next_write_and_live_ones_kept(tmp_path):
    import os
    import subprocess
    import sys

    from mlmclm.io import clear_leftovers

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()  # a process that has ended
    target = tmp_path / "tasks" / "brown_upos"
    dead_dir = tmp_path / "tasks" / f".brown_upos.{gone}.k3j2.tmp"  # a task build killed before its rename
    (dead_dir / "part").mkdir(parents=True)
    old_style = tmp_path / "tasks" / ".brown_upos.a8f_q2zz.tmp"  # written before names carried a process id
    old_style.write_text("half")
    live = tmp_path / "tasks" / f".brown_upos.{os.getpid()}.x1.tmp"  # this process is writing it now
    live.write_text("in progress")
    other = tmp_path / "tasks" / f".brown_propn.{gone}.x1.tmp"  # another path's: not this write's to clear
    other.write_text("x")
    with atomic_path(target, is_dir=True) as d:
        assert d.name.startswith(f".brown_upos.{os.getpid()}.") and d.name.endswith(".tmp")
        (d / "train.jsonl").write_text("{}\n")
    assert not dead_dir.exists() and not old_style.exists() and live.exists() and other.exists()
    assert (target / "train.jsonl").is_file()
    assert clear_leftovers(tmp_path / "tasks" / "brown_propn") == [other] and not other.exists()


def test_a_full_disk_names_the_file_being_written_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno
    from pathlib import Path

    target = tmp_path / "r" / "results.json"
    write_json(target, {"a": 1})

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError) as err:
        write_json(target, {"a": 2})
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(target)
    assert list(target.parent.iterdir()) == [target] and '"a": 1' in target.read_bytes().decode()


def test_a_dataset_sets_its_own_protocol_and_the_rest_keep_the_default():
    """`finetune.per_dataset`: a dataset's lrs, seeds, epochs, sizes on top of the scale's default; the resolved
    protocol holds no per_dataset (a run records what it was computed with)."""
    from mlmclm.config import finetune_config

    cfg = finetune_config(scale_config("long"), ["per_dataset.multiemo_sentiment.lrs=[1e-4, 1e-3]",
                                                 "per_dataset.multiemo_sentiment.seeds=[0, 1, 2, 3, 4, 5, 6, 7]",
                                                 "per_dataset.multiemo_sentiment.max_eval=4000"])
    sc, tc = cfg.for_dataset("multiemo_sentiment"), cfg.for_dataset("brown_upos")
    assert (sc.lrs, sc.seeds, sc.max_eval, sc.epochs) == ([1e-4, 1e-3], list(range(8)), 4000, cfg.epochs)
    assert (tc.lrs, tc.seeds, tc.max_eval) == (cfg.lrs, cfg.seeds, cfg.max_eval)
    assert sc.per_dataset == tc.per_dataset == {} and cfg.per_dataset["multiemo_sentiment"].max_eval == 4000


def test_screen_seeds_is_a_datasets_own_grid_field_and_never_negative():
    """`screen_seeds` (issue 60): settable per dataset like `seeds`, no part of a run's protocol (results of a full grid
    count in a screened one), and a negative value refused in one line naming it; the twin screens SC alone."""
    from mlmclm.config import GRID_FIELDS, finetune_config, finetune_protocol, to_dict
    from mlmclm.evaluation.grid import screen_split

    cfg = finetune_config(scale_config("tiny"), ["seeds=[0, 1, 2]", "per_dataset.multiemo_sentiment.screen_seeds=2"])
    sc, tc = cfg.for_dataset("multiemo_sentiment"), cfg.for_dataset("brown_upos")
    assert (sc.screen_seeds, tc.screen_seeds) == (2, 0) and "screen_seeds" in GRID_FIELDS
    assert screen_split(sc) == ([0, 1], [2]) and screen_split(tc) == ([0, 1, 2], [])
    assert screen_split(finetune_config(scale_config("tiny"), ["seeds=[0, 1]", "screen_seeds=2"])) == ([0, 1], [])
    assert finetune_protocol({**to_dict(sc), "screen_seeds": 0}) == finetune_protocol(to_dict(sc))
    for override in ("screen_seeds=-1", "per_dataset.multiemo_sentiment.screen_seeds=-1"):
        with pytest.raises(ConfigError, match=r"screen_seeds must be 0 \(every seed at every rate\) or more") as err:
            finetune_config(scale_config("tiny"), [override])
        assert "\n" not in str(err.value) and "got -1" in str(err.value)
    twin = finetune_config(scale_config("twin"))
    assert {name: twin.for_dataset(name).screen_seeds for name in twin.datasets} == {
        "multiemo_sentiment": 2, "brown_upos": 0, "squad_retrieval": 0, "nq_retrieval": 0, "vitaminc_retrieval": 0}
    assert all(finetune_config(scale_config(s)).for_dataset("multiemo_sentiment").screen_seeds == 0
               for s in ("tiny", "mini", "long", "longer", "small", "paper"))


@pytest.mark.parametrize("override,match", [
    ("finetune.per_dataset.multiemo_sentiment.qa_stride=4", "unknown config key finetune.per_dataset.multiemo_sentiment"
                                                            ".qa_stride; known keys: lrs, seeds, epochs"),
    ("finetune.per_dataset.multiemo_sentiment.lrs=[-1]", "per_dataset.multiemo_sentiment: lrs must be positive"),
    ("finetune.per_dataset.multiemo_sentiment.epochs=x", "per_dataset.multiemo_sentiment.epochs must be an integer"),
    ("finetune.per_dataset.multiemo_sentiment=3", "per_dataset.multiemo_sentiment must be a mapping"),
])
def test_a_bad_per_dataset_protocol_is_one_line(override, match):
    from mlmclm.config import scale_config

    with pytest.raises(ConfigError, match=match) as err:
        scale_config("tiny", [override])
    assert "\n" not in str(err.value)


def test_a_config_resolves_its_folders_against_the_working_root_and_keeps_its_record(tmp_path):
    """A config's relative folders name places in the working root, whatever the working directory (no `chdir`):
    `resolved` joins them to the root; a file or folder it may name (corpus, tokenizer, a decoder) where it is there,
    a keyword or a hub id left as it is. The config as written, its record and identity, does not change."""
    (tmp_path / "texts").mkdir()
    cfg = load_config(PretrainConfig, {"data": {"corpus": "texts", "tokenizer": "someone/tokenizer"},
                                       "init": {"kind": "run", "path": "checkpoints/tiny/parent"}})
    record = to_yaml(cfg)
    at = cfg.resolved(tmp_path)
    assert (at.results_dir, at.checkpoints_dir, at.data.root) == tuple(
        str(tmp_path / p) for p in ("results/runs", "checkpoints", "data"))
    assert (at.init.path, at.data.corpus) == (str(tmp_path / "checkpoints/tiny/parent"), str(tmp_path / "texts"))
    assert at.data.tokenizer == "someone/tokenizer" and to_yaml(cfg) == record
    assert at.resolved(tmp_path / "elsewhere") == at  # an absolute path stays where it is
    plain = PretrainConfig().resolved(tmp_path)
    assert (plain.data.corpus, plain.data.tokenizer, plain.init.path) == ("offline", "train", None)
    decoder = load_config(PretrainConfig, {"init": {"kind": "hf", "path": "owner/name"}}).resolved(tmp_path)
    assert decoder.init.path == "owner/name"


def test_curve_epochs_is_no_setting_of_a_run_and_never_negative():
    """`curve_epochs` (after which earlier epochs validation is scored) changes no result: not part of a run's
    protocol; a negative value is refused in one line naming it. The twin scores the last earlier epoch only."""
    from mlmclm.config import GRID_FIELDS, finetune_config, finetune_protocol, to_dict

    cfg = finetune_config(scale_config("twin"))
    assert cfg.curve_epochs == 1 and "curve_epochs" in GRID_FIELDS
    assert finetune_protocol({**to_dict(cfg), "curve_epochs": 0}) == finetune_protocol(to_dict(cfg))
    with pytest.raises(ConfigError, match=r"curve_epochs must be 0 \(validation after every epoch\) or more") as err:
        finetune_config(scale_config("tiny"), ["curve_epochs=-1"])
    assert "\n" not in str(err.value)
