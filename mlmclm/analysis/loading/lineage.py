"""A model's attributes from its run's records: size, objective, masking ratio and step counts read from the run's
``config.yaml`` (its phases, seed and the run it starts from) and from those of the runs it continues, never from its
folder name. The id grammar (`ids.parse_model_id`) stays for the models that have no record here: the paper's,
EncodEval's, and models pretrained elsewhere.

A run's *lineage* is its schedule from the start of the first run it descends from, as (objective, steps) segments:

    from scratch                      its own phases                                   (offset 0)
    a branch (init.optimizer: true)   its phases restate the parent's from the parent's own start, so the part
                                      before the parent's start, then its own phases      (the parent's offset)
    continued pretraining (CPT)       the parent's lineage up to the checkpoint it starts from, then its own phases
                                      (offset: that checkpoint's place in the lineage; the run's own steps count
                                      from 0 again)

A checkpoint's step is in its run's own count (its folder ``step_<step>`` in a fine-tuning result's
``meta.checkpoint``, which ``meta.step`` repeats); its place in the lineage is the run's offset plus that step.

A record is believed only when whole and agreeing with itself (`runs.read_record`: readable YAML and JSON, the
config's identity the one its meta.json records): a run whose parent has no record, an ``init.path`` chain that
loops, or a checkpoint step that disagrees with its folder or lies past the run's last step is a `ResultFileError`
naming the file, never a missing or guessed attribute. No torch import here.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...config import PretrainConfig, load_config
from ...errors import ConfigError, ResultFileError
from ...paths import CONFIG, step_of
from ...runs import RESTORE, Record, read_record
from ...schedule import CLM, AnyObjective, Objective, Ramp, parse_objective
from .ids import BEYOND_OBJECTIVES, size_label

# the fields of a run's config that do not make it another model: its name and folders, how often it logs, which
# checkpoints it keeps, and its seeds (initialisation and masking, the data's order); runs that differ only in these
# are one pretraining-seed family (`Records.family`)
NOT_FAMILY = ("run_id", "seed", "results_dir", "checkpoints_dir", "log_every", "checkpoint", "data.seed",
              "data.offset", "data.root")


@dataclass(frozen=True)
class Lineage:
    segments: tuple[tuple[AnyObjective, int], ...]  # (objective, steps) from the first run's start
    offset: int                                      # lineage steps before the run's own step 0
    cpt_start: int | None                            # where the decayed run it continues ended; None: no CPT
    size: str
    seed: int

    @property
    def final(self) -> int:
        """The run's last step, in its own count."""
        return sum(n for _, n in self.segments) - self.offset


def _upto(segments, steps: int) -> list[tuple[AnyObjective, int]]:
    """The first `steps` steps of a lineage."""
    out = []
    for objective, n in segments:
        if steps <= 0:
            break
        out.append((objective, min(n, steps)))
        steps -= n
    return out


class Records:
    """The run records under one folder (a scale's run folders, ``<folder>/<run>/config.yaml``), each read once by
    `runs.read_record`: a record that is damaged or disagrees with itself is refused, never read as another run."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._records: dict[str, Record | None] = {}

    def record(self, run: str) -> Record | None:
        """The run's record, None where it has none (`runs.read_record`)."""
        if run not in self._records:
            self._records[run] = read_record(self.folder / run)
        return self._records[run]

    def config(self, run: str) -> PretrainConfig | None:
        """The run's recorded config, None where there is none or it names no phases (a run recorded before
        phases); one that is not a config is a `ResultFileError` naming it."""
        record = self.record(run)
        if record is None or "phases" not in record.config:
            return None
        try:
            return load_config(PretrainConfig, record.config)
        except ConfigError as e:
            raise ResultFileError(f"{record.folder / CONFIG}: {e}; {RESTORE}") from None

    def family(self, run: str) -> str:
        """What run `run` shares with the runs that differ from it only in their seeds: its recorded config without
        the `NOT_FAMILY` fields, the run it starts from (``init.path``) by that run's family. Call it on a run whose
        `lineage` is known (its records whole, its parents' too)."""
        cfg = self.config(run)
        fields = dataclasses.asdict(cfg)
        for name in NOT_FAMILY:
            *parents, key = name.split(".")
            part = fields
            for parent in parents:
                part = part[parent]
            part.pop(key)
        if cfg.init.kind == "run":
            fields["init"]["path"] = self.family(Path(cfg.init.path).name)
        return json.dumps(fields, sort_keys=True, default=str)

    def lineage(self, run: str, _chain: tuple[str, ...] = ()) -> Lineage | None:
        """Run `run`'s lineage; None where the run has no record (or one without phases) or the lineage starts from
        a model pretrained elsewhere (``init.kind: hf``). A run whose parent has no such record, or whose runs loop,
        is a `ResultFileError` naming its config.yaml: its attributes would be guessed."""
        cfg = self.config(run)
        if cfg is None or cfg.init.kind == "hf":
            return None
        phases = tuple((parse_objective(str(o)), int(n)) for o, n in cfg.phases)
        if cfg.init.kind != "run":
            return Lineage(phases, 0, None, cfg.model.size, cfg.seed)
        here, up = self.folder / run / CONFIG, Path(cfg.init.path).name
        if up in (*_chain, run):
            raise ResultFileError(f"{here}: its init.path makes a loop of runs ({' -> '.join((*_chain, run, up))}); "
                                  "a run starts from another run's checkpoint: fix init.path")
        if self.config(up) is None:
            raise ResultFileError(f"{here}: it starts from run {up}, whose record {self.folder / up / CONFIG} is "
                                  "missing or names no phases; restore that record (version control, a backup) or "
                                  "train that run again")
        parent = self.lineage(up, (*_chain, run))
        if parent is None:
            return None
        if cfg.init.optimizer:  # a branch: its phases restate the parent's from the parent's own start
            offset, cpt = parent.offset, parent.cpt_start
        else:  # continued pretraining of the parent's checkpoint
            offset = parent.offset + (parent.final if cfg.init.step is None else cfg.init.step)
            cpt = offset if parent.cpt_start is None else parent.cpt_start
        return Lineage(tuple(_upto(parent.segments, offset)) + phases, offset, cpt, cfg.model.size, cfg.seed)


def _clm_steps(segments) -> int:
    """CLM's share of these segments, in steps (a mixed phase's CLM rows as whole-batch steps: `schedule`)."""
    return sum(n if o == CLM else (0 if isinstance(o, Objective) else o.clm_steps(n)) for o, n in segments)


def _mask_ratio(objective: AnyObjective) -> int | None:
    """A phase's constant masking ratio (%): None for CLM and for a ramp (no single ratio)."""
    if isinstance(objective, Ramp):
        return None
    masked = objective if isinstance(objective, Objective) else objective.masked
    return round(masked.mask_ratio * 100) if masked.has_mlm else None


def attributes(line: Lineage, step: int | None = None) -> dict:
    """The `ids.ATTRIBUTES` of the run's checkpoint after its own `step` (None: its final one), as
    `ids.parse_model_id` gives them for the model's id: ``objective`` ``random`` for the lineage's step 0; ``mixed``
    or ``alternating`` where a phase mixes the objectives, ``ramp`` where one is a masking-ratio ramp; ``detour`` for
    a CPT that trains CLM; else ``clm``, ``mlm`` or ``clm+mlm`` by what the checkpoint trained; the masking ratio of
    the lineage's last MLM phase of one ratio (missing for a ramp alone)."""
    own = line.final if step is None else step
    steps = line.offset + own
    base = {"size": size_label(line.size), "steps": steps, "pretrain_seed": line.seed}
    if steps == 0:
        return {**base, "objective": "random", "mask_ratio": pd.NA, "clm_steps": 0, "mlm_steps": 0, "cpt_steps": 0,
                "intermediate": False}
    done = _upto(line.segments, steps)
    clm = _clm_steps(done)
    pair = next((o for o, _ in line.segments if not isinstance(o, Objective)), None)
    detour = line.cpt_start is not None and _clm_steps(line.segments) > _clm_steps(_upto(line.segments,
                                                                                           line.cpt_start))
    ratios = [r for o, _ in line.segments if (r := _mask_ratio(o)) is not None]
    if pair is not None:
        objective = BEYOND_OBJECTIVES[pair.kind]
    elif detour:
        objective = BEYOND_OBJECTIVES["detour"]
    else:
        objective = "clm+mlm" if clm and steps - clm else ("clm" if clm else "mlm")
    return {**base, "objective": objective, "mask_ratio": ratios[-1] if ratios and steps - clm else pd.NA,
            "clm_steps": clm, "mlm_steps": steps - clm,
            "cpt_steps": steps - line.cpt_start if line.cpt_start is not None else 0,
            "intermediate": own != line.final}


def evaluated(path: str | Path, meta: dict) -> tuple[str, int] | None:
    """The run and own step of the checkpoint that the ``meta`` of the fine-tuning result at ``path`` names (its
    ``checkpoint``: ``<checkpoints>/<scale>/<run>/step_<step>/...``); None for a model that is not a run's checkpoint
    (a hub id, a folder of weights). A ``meta.step`` other than that folder's step is a `ResultFileError` naming the
    file: the result would be read as another checkpoint's."""
    checkpoint = Path(str(meta.get("checkpoint") or ""))
    found = next((p for p in (checkpoint, *checkpoint.parents) if step_of(p) is not None), None)
    if found is None:
        return None
    step = step_of(found)
    if "step" in meta and (isinstance(meta["step"], bool) or meta["step"] != step):
        raise ResultFileError(f"{path}: its meta.step {meta['step']!r} is not the step of the checkpoint it names "
                              f"({found.name}): the file was edited or belongs to another checkpoint's results; "
                              "write it again by fine-tuning that checkpoint")
    return found.parent.name, step


def recorded(records: Records, checkpoints: dict) -> dict:
    """model -> its attributes and family (`with_family`), for each model (``checkpoints``: model -> (its
    `evaluated` checkpoint or None, a results.json that names it)) whose run's lineage is in ``records``. A step past
    the run's last is a `ResultFileError` naming the results.json and the run's config.yaml: it would be read as
    another schedule."""
    lines, out = {}, {}
    for model, (found, path) in checkpoints.items():
        if found is None:
            continue
        run, step = found
        if run not in lines:
            lines[run] = records.lineage(run)
        if (line := lines[run]) is None:
            continue
        if step > line.final:
            raise ResultFileError(f"{path}: evaluates run {run} at step {step}, past its last step {line.final} "
                                  f"({records.folder / run / CONFIG}): the result or that config belongs to another "
                                  "run; restore the one that was changed")
        out[model] = with_family(records, run, line, step)
    return out


def with_family(records: Records, run: str, line: Lineage, step: int | None = None) -> dict:
    """The `attributes` of run `run`'s checkpoint after its own `step` (None: its final one; ``line``: the run's
    lineage) and its ``family``: what it shares with the checkpoints of runs that differ from it only in their seeds
    (the run's `Records.family` and the step)."""
    step = line.final if step is None else step
    return {**attributes(line, step), "family": f"{records.family(run)} at step {step}"}
