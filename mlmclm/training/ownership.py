"""A run's folders and its claim on them, checked before any work: the run folder that holds its record and the
checkpoint folder that holds its checkpoints are its own, or refused in one line naming both.

A run is its resolved config (config.yaml): its identity is the hash of that config without where its files go
(`runs.identity`, `runs.config_identity`), stored in meta.json, in every checkpoint's trainer state and in the
checkpoint folder's run.json (`owner`, written by `claim`); a run recorded under its legacy identity
(`runs.legacy_identity`) is still its own. A run refuses, in one line naming both, a results folder
(`check_run_folder`) or a checkpoint folder (`claim`, `check_results_named`) of another identity, so it never removes,
overwrites or resumes another run's checkpoints. Results written before identities (meta.json without one: the
committed runs) are checked by their config.yaml alone, which is what the identity hashes. A run_id written as a model
id names the model its config trains (`check_run_id`).
"""

from __future__ import annotations

from pathlib import Path

from .. import store
from ..config import PretrainConfig, to_yaml
from ..errors import ConfigError, ResultFileError
from ..io import read_json
from ..paths import CONFIG, META, run_folder
from ..runs import ModelId, config_identity, id_of, identity, legacy_identity
from . import checkpoints


def owner(cfg: PretrainConfig) -> dict:
    """What a checkpoint folder records of the run it belongs to (`checkpoints.claim`)."""
    return {"identity": identity(cfg), "run_id": cfg.run_id,
            "results": str(run_folder(cfg.results_dir, cfg.scale, cfg.run_id))}


def claim(root: Path, cfg: PretrainConfig, write: bool = True) -> None:
    """`checkpoints.claim` of the checkpoint folder `root` for the run of `cfg`, under its identity or the legacy
    one its folder may record (`runs.legacy_identity`)."""
    checkpoints.claim(root, owner(cfg), write, legacy=legacy_identity(to_yaml(cfg)))


def check_run_id(cfg: PretrainConfig) -> None:
    """A run_id written as a model id (`runs.ModelId`) must be the one its config trains (`runs.id_of`): the analysis
    reads a run's objective, steps and seed from it. A name that is no model id (`my-run`) is free."""
    try:
        named = ModelId.parse(cfg.run_id)
    except ResultFileError:
        return
    derived = id_of(cfg)
    if derived is not None and named != derived:
        raise ConfigError(f"run_id={cfg.run_id!r} names another model than this config trains ({derived}: its "
                          f"size, phases, seed and the run it starts from); set run_id={derived}, or a name that is "
                          "not a model id")


def check_run_folder(cfg: PretrainConfig, run_dir: Path) -> None:
    """Refuse a run folder that holds another config under this run_id (its meta.json's identity, its config.yaml's):
    one that differs only in where its files go is this run's."""
    me, text = owner(cfg), to_yaml(cfg)
    recorded, other = _recorded_identity(run_dir / META), None
    if recorded not in (None, me["identity"], legacy_identity(text)):
        other = f"identity {recorded}"
    elif (run_dir / CONFIG).exists() and config_identity((run_dir / CONFIG).read_text()) != me["identity"]:
        other = "its config.yaml differs"
    if other:
        raise ConfigError(f"{run_dir} holds run {cfg.run_id!r} with another config ({other}), not this one "
                          f"(identity {me['identity']}); choose another run_id, or delete that folder and its "
                          f"checkpoints to start over")


def check_results_named(ckpt_root: Path, run_dir: Path, root: Path) -> None:
    """Refuse a checkpoint folder whose run.json names another results folder that holds the run's record: the same
    config run twice into two results folders would otherwise share, and rewind, one set of checkpoints. (A run
    moved whole, or whose results folder is gone, has none there.)"""
    run = store.owner(ckpt_root)
    named = run.get("results") if isinstance(run, dict) else None
    if not isinstance(named, str):
        return
    named = Path(named) if Path(named).is_absolute() else root / named
    if named.resolve() != run_dir.resolve() and (named / CONFIG).exists():
        raise ConfigError(f"{ckpt_root} holds the checkpoints of the run recorded in {named}, not in {run_dir}: "
                          f"write this run's results there (results_dir), or its checkpoints elsewhere "
                          f"(checkpoints_dir)")


def _recorded_identity(meta_path: Path) -> str | None:
    """The identity a run folder's meta.json records (None when it has none: a new run, or one written before
    identities; a damaged meta.json is `runlog.finished`'s to name)."""
    try:
        meta = read_json(meta_path) if meta_path.exists() else {}
    except ResultFileError:
        return None
    return meta.get("identity") if isinstance(meta, dict) else None
