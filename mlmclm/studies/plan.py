"""What a study plan holds: its pretraining runs (`Run`, in this scale's steps), the checkpoints it fine-tunes
(`Evaluation`) and the `Plan` of a scale, which `design.build_plan` fills and every other module of the package reads.
A plan narrows to some studies or some models with the runs they start from (`Plan.for_studies`, `Plan.for_models`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import REFERENCE, ScaleConfig
from ..errors import ConfigError
from ..runs import ModelId


@dataclass
class Run:
    """One pretraining run: phases from `start` (the parent's checkpoint) to `total`, in this scale's steps."""
    id: ModelId
    size: str                                    # its shape (`sizes.SIZES`): a decoder's own for a decoder's CPT
    phases: list[tuple[str, int]]
    part: str                                    # base, biphasic or cpt (the paper's accounting); reference; beyond
    parent: str | None = None                    # the run whose checkpoint this one starts from
    parent_step: int | None = None
    optimizer: bool = False                      # carries the parent's optimizer and step count on
    warmup: int = 0
    decay: int = 0
    offset: int = 0                              # first sample of the data stream, in steps of the run's batch
    decoder: str | None = None                   # a decoder of the scale's `cpt_decoders` this run continues
    checkpoints: set[int] = field(default_factory=set)   # named checkpoints that other work needs
    studies: set[str] = field(default_factory=set)

    @property
    def run_id(self) -> str:
        return str(self.id)

    @property
    def grid(self) -> str:
        """The grid whose tree holds its record (`paths.Paths.run`): a decoder's CPT, the reference grid's."""
        return REFERENCE if self.decoder else "default"

    @property
    def seed(self) -> int:
        """The pretraining seed (initialisation and masks), the id's -p{seed}."""
        return self.id.seed

    @property
    def total(self) -> int:
        return sum(n for _, n in self.phases)

    @property
    def start(self) -> int:
        return self.parent_step if self.optimizer else 0

    @property
    def trained(self) -> int:
        return self.total - self.start

    @property
    def phases_text(self) -> str:
        """Its phases as the plan prints them: "clm 300 + mlm40 120 steps"."""
        return " + ".join(f"{o} {n}" for o, n in self.phases) + " steps"


@dataclass
class Evaluation:
    """A fine-tuning grid on one checkpoint: a run's final one (`model.step` None) or an intermediate one."""
    model: ModelId
    grid: str                                    # "default", "stability", "control" or "reference"
    studies: set[str] = field(default_factory=set)

    @property
    def model_id(self) -> str:
        return str(self.model)

    @property
    def run_id(self) -> str:
        return str(self.model.run)

    @property
    def step(self) -> int | None:
        return self.model.step


@dataclass
class Plan:
    """The runs and evaluations of some studies at one scale (`design.build_plan`)."""
    scale: ScaleConfig
    runs: dict[str, Run]                         # in training order: parents before children
    evaluations: dict[tuple[str, str], Evaluation]
    template: dict                               # the scale's run template (`run_template`), read once; never changed
    studies: list[str]                           # the studies it holds (`for_studies`: those asked for)

    def for_studies(self, names) -> "Plan":
        """The part of the plan that `names` (`resolve_names`) need: their evaluations, their runs and every run those
        start from."""
        evals = {k: e for k, e in self.evaluations.items() if e.studies & set(names)}
        keep = {r for r, run in self.runs.items() if run.studies & set(names)} | {e.run_id for e in evals.values()}
        return self._keeping(evals, keep, list(names))

    def for_models(self, model_ids) -> "Plan":
        """The part of the plan that evaluates the models `model_ids` (a model id the plan does not evaluate is a
        `ConfigError` naming the close ones): their evaluations, their runs and every run those start from. A run
        that no study evaluates (a calibration seed's) is named by its run id: it alone, with what it starts from."""
        known = sorted({e.model_id for e in self.evaluations.values()})
        for model in model_ids:
            if model not in known and model not in self.runs:
                import difflib

                close = difflib.get_close_matches(model, known, n=3, cutoff=0.5)
                raise ConfigError(f"--model {model}: not a model these studies evaluate at scale {self.scale.scale}; "
                                  + (f"did you mean {', '.join(close)}?" if close else "see `mlmclm study plan`"))
        evals = {k: e for k, e in self.evaluations.items() if e.model_id in model_ids}
        unevaluated = {m for m in model_ids if m not in known}
        return self._keeping(evals, {e.run_id for e in evals.values()} | unevaluated, self.studies)

    def _keeping(self, evals: dict, keep: set, names: list) -> "Plan":
        """The plan of `evals`, the runs `keep` and every run those start from."""
        todo = list(keep)
        while todo:
            parent = self.runs[todo.pop()].parent
            if parent and parent not in keep:
                keep.add(parent)
                todo.append(parent)
        return Plan(self.scale, {r: run for r, run in self.runs.items() if r in keep}, evals, self.template, names)

    def checkpoint_step(self, e: Evaluation) -> int:
        """The step of the checkpoint `e` fine-tunes: its own, or its run's last."""
        return e.step if e.step is not None else self.runs[e.run_id].total
