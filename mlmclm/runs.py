"""A model id and a run's record: the one module that writes a model id and parses it back (`ModelId`), and the one
reader of a run's record (`read_record`) with its identity (`identity`, `config_identity`). Where a run lives:
`mlmclm.paths`. Torch- and pandas-free.

A model id (results/README.md, "Model ids") is the paper's released model name, in a scale's steps:

    {size}-{clm|mlmR}-{steps}                     one objective from scratch          mini-xs-clm-9240
    {size}-clm-{steps}-mlmR-{total}               CLM to `steps`, then MLM (biphasic)  mini-xs-clm-2200-mlm40-9240
    {size}-{clm|mlmR}-dec{steps}-mlmR-{total}     MLM continued pretraining (CPT) of   mini-xs-clm-dec9240-mlm40-11440
                                                  the decayed run {size}-{obj}-{steps}
    {size}-{mix|alt}{c}clm{m}mlmR-{steps}         a mixed or alternating objective    mini-xs-mix1clm15mlm40-4620
                                                  from scratch (`mlmclm.schedule`)
    {size}-mlmRtoR2-{steps}                       a masking-ratio ramp from R% to R2%  twin-mlm40to20-21k
                                                  from scratch (`mlmclm.schedule`)
    {size}-mlmR-dec{steps}-clm-{k}-mlmR-{total}   the CLM detour: CPT of the decayed   mini-xs-mlm40-dec4620-clm-5830-
                                                  run with CLM to step `k`, then MLM   mlm40-7040
    ...-p{N}                                      pretraining seed N (none: seed 0)   mini-xs-clm-9240-p1
    ...-{step}                                    the run's checkpoint after `step`   mini-xs-clm-9240-2200
                                                  (0: its initial weights, the random-init control)

Every step count is counted from the start of the first run (a CPT's and a detour's `k` and `total` too: the detour
above trains CLM for 1,210 steps after the decayed run's 4,620, then MLM-40% to 7,040).

Step counts of the run are written `42k` when they are whole thousands (`config.step_text`); a checkpoint's step
always in full (`610m-mlm40-42k-1000`). The size is a model size (`sizes.SIZES`) or, for the CPT of a decoder pretrained
elsewhere (`cpt_decoders`), the decoder's name. An id that starts with a model size and a dash has that size (the
longest that fits), so that a longer id never reads as a size (`mini-xs-mlm40-dec9240-clm-1100-mlm40-2200` is not
the biphasic run of a size `mini-xs-mlm40-dec9240`: it is a detour of `mini-xs-mlm40-9240` ending before that run
did, and refused).

A run's record is read by one reader (`read_record`), believed only when whole and agreeing with itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .config import PretrainConfig, read_yaml, step_text, to_yaml
from .errors import ConfigError, ResultFileError
from .io import read_json
from .paths import CONFIG, META
from .schedule import Objective, parse_objective
from .sizes import SIZES

_REST = (r"(?P<obj>clm|mlm\d+(?:to\d+)?|(?:mix|alt)\d+clm\d+mlm\d+)-(?P<dec>dec)?(?P<steps>\d+k?)"
         r"(?:-clm-(?P<detour>\d+k?))?(?:-(?P<then>mlm\d+)-(?P<total>\d+k?))?(?:-p(?P<seed>\d+))?(?:-(?P<step>\d+))?$")
_ID = re.compile(r"^(?P<size>[a-z0-9][a-z0-9-]*?)-" + _REST)  # a decoder's name (`cpt_decoders`) as the size
_SIZED = re.compile(r"^(?P<size>" + "|".join(sorted(map(re.escape, SIZES), key=len, reverse=True)) + ")-" + _REST)
FORM = ("{size}-{clm|mlmR|mlmRtoR2|mix{c}clm{m}mlmR|alt{c}clm{m}mlmR}-[dec]{steps}[-clm-{k}][-mlmR-{total}][-p{N}]"
        "[-{step}]")


def _match(text: str) -> re.Match | None:
    """The id's parts: its size a model size where it starts with one and a dash (`_SIZED`), else any name."""
    sized = any(text.startswith(f"{size}-") for size in SIZES)
    return (_SIZED if sized else _ID).match(text)


def _malformed(m: re.Match | None) -> bool:
    """Whether the parts break the forms' rules: "dec" and "-clm-{k}" need a second phase, a second phase without
    "dec" follows CLM only (the biphasic form)."""
    return (m is None or (m["total"] is None and m["dec"]) or (m["detour"] and not m["dec"])
            or (m["total"] and not m["dec"] and m["obj"] != "clm"))


def steps_token(steps: int) -> str:
    """A run's step count as its id writes it: 42000 -> "42k"; a scale's own counts stay as they are (420, and 0)."""
    return step_text(steps, "k") if steps else str(steps)


def _steps(token: str) -> int:
    return int(token[:-1]) * 1000 if token.endswith("k") else int(token)


@dataclass(frozen=True)
class ModelId:
    """One model id, written by `str()` and read by `ModelId.parse` (the module's docstring has the forms)."""
    size: str
    objective: str                 # the first phase's: clm, mlmR (R: masking, in percent), mlmRtoR2 (a ramp), mix..
    steps: int                     # where the first phase ends (a CPT: the length of the decayed run it continues)
    then: str | None = None        # the second phase's objective (mlmR), up to `total`
    total: int | None = None
    cpt: bool = False              # the second phase continues the decayed run `continues` ("dec")
    seed: int = 0                  # the pretraining seed
    step: int | None = None        # the evaluated checkpoint; None: the run's final one
    detour: int | None = None      # a CPT's CLM detour: CLM up to this step, then `then` up to `total`

    def __str__(self) -> str:
        text = f"{self.size}-{self.objective}-{'dec' if self.cpt else ''}{steps_token(self.steps)}"
        text += f"-clm-{steps_token(self.detour)}" if self.detour is not None else ""
        text += f"-{self.then}-{steps_token(self.total)}" if self.then else ""
        text += f"-p{self.seed}" if self.seed else ""
        return text + (f"-{self.step}" if self.step is not None else "")

    @classmethod
    def parse(cls, text: str) -> "ModelId":
        """The id `text` names; a `ResultFileError` (a `ValueError`) when it does not follow the naming."""
        m = _match(text)
        if _malformed(m):
            raise ResultFileError(f"model id {text!r} does not follow {FORM}")
        first = _steps(m["steps"])
        total = _steps(m["total"]) if m["total"] else None
        detour = _steps(m["detour"]) if m["detour"] else None
        if total is not None and total < first:
            raise ResultFileError(f"model id {text!r}: total {total} steps is less than its first phase ({first})")
        if detour is not None and not first < detour < total:
            raise ResultFileError(f"model id {text!r}: its CLM detour must end after step {first} (the decayed "
                                  f"run's) and before {total} (its total)")
        return cls(m["size"], m["obj"], first, m["then"], total, bool(m["dec"]), int(m["seed"] or 0),
                   int(m["step"]) if m["step"] is not None else None, detour)

    @property
    def length(self) -> int:
        """The run's steps (from its own start or, for a CPT, from the decayed run's)."""
        return self.total if self.total is not None else self.steps

    @property
    def mask_ratio(self) -> int | None:
        """The masking ratio of the run's MLM (its last MLM phase), None for a CLM-only run and for a masking-ratio
        ramp (`mlm40to20`: no single ratio)."""
        ratio = re.search(r"mlm(\d+)$", self.then or self.objective)
        return int(ratio[1]) if ratio else None

    @property
    def kind(self) -> str:
        """The first phase's objective kind: "clm", "mlm", "mix" (mixed batches), "alt" (alternating steps) or
        "ramp" (a masking-ratio ramp)."""
        o = parse_objective(self.objective)
        return o.name if isinstance(o, Objective) else o.kind

    @property
    def run(self) -> "ModelId":
        """The run whose checkpoint this is (the id without its checkpoint step)."""
        return dataclasses.replace(self, step=None)

    def at(self, step: int | None) -> "ModelId":
        """The run's checkpoint after `step` (None: its final one)."""
        return dataclasses.replace(self, step=step)

    @property
    def family(self) -> "ModelId":
        """The id without its pretraining seed: the models that differ only in their pretraining seed share it."""
        return dataclasses.replace(self, seed=0)

    @property
    def continues(self) -> "ModelId | None":
        """A CPT run's (or a detour's) lineage: the decayed run it continues (same size, objective and seed), None for
        other runs."""
        return ModelId(self.size, self.objective, self.steps, seed=self.seed) if self.cpt else None


def id_of(cfg) -> ModelId | None:
    """The model id a pretraining config trains (`config.PretrainConfig`): from its size, phases, seed and the run it
    starts from. A run's phases are its whole schedule from its own start, also where it branches off another run's
    checkpoint with that run's optimizer (a shared segment). From scratch, or branching off a run from scratch:
    `{size}-{obj}-{steps}`, `{size}-clm-{k}-mlmR-{total}`. From a run's final checkpoint without its optimizer
    (continued pretraining of the decayed run), or branching off such a CPT: `{size}-{obj}-dec{steps}-mlmR-{total}`,
    with a CLM detour when it has two phases. None where no id form fits (a decoder pretrained elsewhere, ...)."""
    phases = [(str(o), int(n)) for o, n in cfg.phases]
    size, seed, init = cfg.model.size, cfg.seed, cfg.init
    if init.kind == "hf" or len(phases) > 2:
        return None
    parent = None
    if init.kind == "run":
        try:
            parent = ModelId.parse(Path(init.path).name)
        except ResultFileError:
            return None
    if parent is not None and (parent.cpt or not init.optimizer):  # CPT of a decayed run
        decayed = parent.continues if parent.cpt else parent
        start = decayed.length
        if len(phases) == 1:
            return ModelId(size, decayed.objective, start, phases[0][0], start + phases[0][1], True, seed)
        if phases[0][0] != "clm":
            return None
        detour = start + phases[0][1]
        return ModelId(size, decayed.objective, start, phases[1][0], detour + phases[1][1], True, seed, detour=detour)
    if len(phases) == 1:
        return ModelId(size, phases[0][0], phases[0][1], seed=seed)
    if phases[0][0] != "clm":
        return None
    return ModelId(size, "clm", phases[0][1], phases[1][0], phases[0][1] + phases[1][1], seed=seed)


RESTORE = "restore it (version control, a backup) or train the run again"


# where a run's files go, not what it trains: left out of its identity, so that a run moved to other folders (or
# resumed with them) stays the same run
LOCATIONS = ("results_dir", "checkpoints_dir", "data.root")


def config_identity(text: str) -> str:
    """A run's identity from the text of its config.yaml (`identity`: its resolved config as
    `config.to_yaml` writes it): the sha256 of the config as canonical JSON without its `LOCATIONS`, its first 16 hex
    digits. A text that is not a YAML mapping has its `legacy_identity`."""
    config = yaml.safe_load(text)
    if not isinstance(config, dict):
        return legacy_identity(text)
    canonical = json.dumps(_without(config, LOCATIONS), sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _without(mapping: dict, keys: tuple[str, ...]) -> dict:
    """`mapping` without the dotted `keys` (a copy)."""
    kept = {k: v for k, v in mapping.items() if k not in keys}
    for head in {key.split(".", 1)[0] for key in keys if "." in key}:
        if isinstance(kept.get(head), dict):
            kept[head] = _without(kept[head], tuple(k.split(".", 1)[1] for k in keys if k.startswith(head + ".")))
    return kept


def legacy_identity(text: str) -> str:
    """The identity that runs recorded before `LOCATIONS` were left out carry (meta.json, run.json, trainer states):
    the sha256 of the config's whole text, its first 16 hex digits. Readers accept it beside `config_identity`."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def identity(cfg: PretrainConfig) -> str:
    """A run's identity: the hash of its config, where its files go left out (its config.yaml's text:
    `config_identity`)."""
    return config_identity(to_yaml(cfg))


@dataclass(frozen=True)
class Record:
    """A run's record (`read_record`): its config.yaml as a mapping, its meta.json ({} before the run wrote one), the
    identity of the config's text and its `legacy_identity` (which runs recorded before carry)."""
    folder: Path
    config: dict
    meta: dict
    identity: str
    legacy: str

    def answers_to(self, identity: str | None) -> bool:
        """Whether `identity` (a meta.json's, a run.json's, a trainer state's) is this record's, new or legacy."""
        return identity in (self.identity, self.legacy)

    @property
    def final_step(self) -> int | None:
        """The run's last step: the total of its config's phases (None where they are not (objective, steps) pairs)."""
        try:
            return sum(int(n) for _, n in self.config["phases"])
        except (KeyError, TypeError, ValueError):
            return None


def read_record(folder: str | Path) -> Record | None:
    """The run record in `folder`, None where it holds no config.yaml: the one reader of a run's config, meta,
    identity and final step. `folder`: a run folder (config.yaml, meta.json), or a checkpoint step folder, which holds
    the config.yaml that trained it (and no meta.json: {}). A record is believed only when whole and
    agreeing with itself, else a one-line `ResultFileError` names the file and what to do: a config.yaml that does
    not read as a YAML mapping, a meta.json that does not read as a JSON object, or a meta.json whose identity is not
    the config.yaml's (the config edited after training). A meta.json without an identity (written before identities)
    agrees."""
    folder = Path(folder)
    if not (folder / CONFIG).is_file():
        return None
    try:
        text, config = read_yaml(folder / CONFIG)
        meta = read_json(folder / META) if (folder / META).exists() else {}
    except (ConfigError, ResultFileError) as e:
        raise ResultFileError(f"{e}; {RESTORE}") from None
    for name, doc, kind in ((CONFIG, config, "a YAML mapping of config keys"), (META, meta, "a JSON object")):
        if not isinstance(doc, dict):
            held = type(doc).__name__ if doc is not None else "nothing"
            raise ResultFileError(f"{folder / name}: not {kind} (it holds {held}); {RESTORE}")
    record = Record(folder, config, meta, config_identity(text), legacy_identity(text))
    if meta.get("identity") is not None and not record.answers_to(meta["identity"]):
        raise ResultFileError(f"{folder / CONFIG}: edited after training (its identity is {record.identity}, "
                              f"{folder / META} records {meta['identity']}); {RESTORE}")
    return record
