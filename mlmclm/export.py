"""`mlmclm export CHECKPOINT OUT [--format eurobert|llama]`: a checkpoint any transformers user loads.

A checkpoint's `hf/` folder is an mlmclm model (`model_type: mlmclm`), which plain transformers does not know. The
export verifies the checkpoint as fine-tuning does (its weights' sha256 against those recorded when it was saved),
converts it (`mlmclm.to_hf`, same weights, equal logits) to transformers' own `EuroBertForMaskedLM` (bidirectional
use: the default for a checkpoint last trained with MLM) or `LlamaForCausalLM` (causal use: the default after CLM),
copies the tokenizer, and writes a model card (README.md): the run, the step, the objective, the tokens seen, the
run's phase schedule and data from the checkpoint's own record (`store.run_record`: the results folder its
`run.json` names, else the config.yaml its step folder holds; checked to be its run's), and the paper. It publishes
the files of a run's checkpoint that were recorded when it was saved (`published`: their sha256 verified, the model
loaded from them alone); a file added to `hf/` since is left out, named in one line.
`AutoModelForMaskedLM` / `AutoModelForCausalLM` then load OUT with no mlmclm import, as the card's snippet does. Its files are readable by all, as the user's umask allows.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .errors import ConfigError, ResultFileError
from .io import atomic_path, check_writable, read_json, shown, umask
from .paths import CONFIG, HF, OWNER
from .runs import RESTORE, Record
from .store import owner, pretrained_model, read_state, run_record

FORMATS = {"eurobert": "EuroBertForMaskedLM (bidirectional; AutoModelForMaskedLM)",
           "llama": "LlamaForCausalLM (causal; AutoModelForCausalLM)"}
PAPER = ("Gisserot-Boukhlef et al., \"Should We Still Pretrain Encoders with Masked Language Modeling?\", "
         "ICLR 2026, arXiv:2507.00994")
_NOT_COPIED = {"config.json", "model.safetensors", "generation_config.json", "README.md"}


def _source(checkpoint: Path, root: Path) -> tuple[Path, str, dict, Record | None]:
    """(the mlmclm transformers folder, the model id, the checkpoint's trainer state or {}, its run's record or None)
    of `checkpoint`: a run's checkpoint folder (its last step), a `step_NNNNNN` folder, or a transformers folder of an
    mlmclm model (`root`: the working root its run's record is found under). A run's checkpoint is verified by its
    weights' sha256, as fine-tuning does."""
    found = pretrained_model(checkpoint, root, verify=True)
    if not found and not checkpoint.exists():
        raise ConfigError(f"{checkpoint}: no such folder; export takes a run's checkpoint folder "
                          "(checkpoints/<scale>/<run_id>), one of its step_NNNNNN folders or its hf/")
    if found:
        hf, model_id, _ = found
        state = read_state(hf.parent)
        return hf, model_id, state, _record(hf.parent, state, root)
    config = checkpoint / "config.json"
    if config.is_file() and read_json(config).get("model_type") == "mlmclm":
        return checkpoint, checkpoint.name, {}, None
    raise ConfigError(f"{checkpoint}: not an mlmclm checkpoint (a run's checkpoint folder, a step_NNNNNN folder or "
                      "a transformers folder with model_type mlmclm)")


def _record(step: Path, state: dict, working: Path) -> Record | None:
    """The record of the run of the checkpoint step folder `step` (`store.run_record`): the results folder its
    run's `run.json` names (a relative one under the working root `working`), else the config.yaml the step folder holds,
    checked to be the run of these checkpoints (its config's identity is the one run.json and the checkpoint's trainer
    state record). None for a folder without run.json (written before identities): the card then shows no recipe
    rather than another run's."""
    root = step.parent
    where = root / OWNER
    try:
        run = owner(root)
    except ResultFileError as e:
        raise ResultFileError(f"{e}; {RESTORE}") from None
    if run is None:
        return None
    results = run.get("results") if isinstance(run, dict) else None
    record = run_record(root, working, step)
    if record is None:
        raise ResultFileError(f"{where}: names no run record with a {CONFIG} (results: {results!r}); restore that "
                              "folder, or train the run again")
    claimed = {run.get("identity"), state.get("identity")} - {None}
    if not claimed or not all(map(record.answers_to, claimed)):
        said = " or ".join(sorted(map(str, claimed))) or "none"
        raise ResultFileError(f"{record.folder / CONFIG}: its identity {record.identity} is not that of the "
                              f"checkpoints in {root} ({said}: {where}, their trainer state): it was edited, or is "
                              f"another run's; {RESTORE}")
    return record


def model_card(model_id: str, fmt: str, state: dict, record: Record | None, config: dict, folder: str) -> str:
    """The export's README.md as the hub reads a model card: a YAML header (licence, library, tags, pipeline), then
    the model, the training data and recipe from the checkpoint's own record (`record`, where it has one), and how to
    load it from `folder` (the export, as its writer named it). Fine-tuning results stay in the repository (they do
    not ship with the export), so the card does not quote them."""
    pipeline = "fill-mask" if fmt == "eurobert" else "text-generation"
    lines = ["---", "license: apache-2.0", "library_name: transformers", f"pipeline_tag: {pipeline}", "tags:",
             "- mlmclm", f"- {'masked-lm' if fmt == 'eurobert' else 'causal-lm'}", "- encoder", "---", "",
             f"# {model_id}", "",
             f"A Llama-style transformer trained with mlmclm, the companion code of {PAPER}, exported to "
             f"transformers' {FORMATS[fmt]}.", "", "| | |", "|---|---|"]
    rows = {"model id": model_id, "step": state.get("step"), "objective at this step": state.get("objective"),
            "tokens seen": f"{state['tokens_seen']:,}" if "tokens_seen" in state else None,
            "layers / hidden / heads": (f"{config.get('num_hidden_layers')} / {config.get('hidden_size')} / "
                                        f"{config.get('num_attention_heads')}"),
            "context": config.get("max_position_embeddings"), "vocabulary": config.get("vocab_size")}
    rows.update(_recipe(record) if record is not None else {})
    lines += [f"| {k} | {v} |" for k, v in rows.items() if v not in (None, "")]
    auto = "AutoModelForMaskedLM" if fmt == "eurobert" else "AutoModelForCausalLM"
    lines += ["", "```python", f"from transformers import AutoTokenizer, {auto}", "",
              f"model = {auto}.from_pretrained({folder!r})  # this folder (its hub id, once uploaded)",
              f"tokenizer = AutoTokenizer.from_pretrained({folder!r})", "```", "",
              "Bidirectional use (the EuroBert format) is how the paper fine-tunes every model, CLM-pretrained ones "
              "included; the Llama format gives causal attention.", ""]
    return "\n".join(lines)


def _recipe(record: Record) -> dict:
    """The training recipe and data of a run's record (its config.yaml and meta.json), as model card rows."""
    cfg, meta = record.config, record.meta
    optim, data = cfg.get("optim") or {}, cfg.get("data") or {}
    manifest = (meta.get("data") or {}).get("manifest") or (meta.get("data") or {}).get("sources")
    return {"scale": cfg.get("scale"),
            "phase schedule": ", ".join(f"{obj} {steps} steps" for obj, steps in cfg.get("phases") or []),
            "recipe": ", ".join(f"{k} {v}" for k, v in (("batch", cfg.get("batch_size")), ("seq", data.get("seq_len")),
                                                        ("peak lr", optim.get("lr")), ("seed", cfg.get("seed")))
                                if v is not None),
            "training data": json.dumps(manifest)[:500] if manifest else data.get("corpus")}


def published(hf: Path, state: dict) -> tuple[list[Path], list[str]]:
    """(the files of the transformers folder `hf` an export publishes, the names of those it leaves out): of a run's
    checkpoint, those its trainer state recorded when it was saved (`checkpoints.write_state`; a file added since is
    in no record, so nothing vouches for it: it never ships); of a folder without that record (a transformers folder,
    a checkpoint saved before every file was recorded), every file it holds."""
    files = sorted(p for p in hf.iterdir() if p.is_file())
    if not isinstance(state.get("files"), dict):
        return files, []
    recorded = {*state["files"], *(state.get("weights") or {})}
    return ([p for p in files if f"{HF}/{p.name}" in recorded],
            [f"{HF}/{p.name}" for p in files if f"{HF}/{p.name}" not in recorded])


def _check_out(out: Path) -> None:
    """Refuse, before any work, an output that is a file, lies under one, is a non-empty folder or cannot be made."""
    above = next((p for p in (out, *out.parents) if p.exists()), None)
    if above is not None and not above.is_dir():
        raise ConfigError(f"{above} is a file{'' if above == out else f', so {out} cannot be made under it'}: "
                          "choose a new folder")
    if out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not empty: choose a new folder")
    check_writable(out, create=False)


def _limit_tokenizer(folder: Path, positions: int) -> None:
    """The tokenizer's `model_max_length` set to the model's position limit (a trained tokenizer has none: then
    `truncation=True` would pass any length to the model)."""
    path = folder / "tokenizer_config.json"
    if path.is_file():
        cfg = read_json(path)
        cfg["model_max_length"] = positions
        path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


def _readable(folder: Path) -> None:
    """The files in `folder` readable as the user's umask allows (transformers writes the weights with mode 600)."""
    for f in folder.iterdir():
        os.chmod(f, (0o777 if f.is_dir() else 0o666) & ~umask())


def export(checkpoint: str | Path, out: str | Path, fmt: str | None = None, *, root: Path) -> Path:
    """Write `checkpoint` to `out` in transformers' EuroBert (`fmt="eurobert"`) or Llama (`"llama"`) format with its
    tokenizer and a model card; `fmt=None`: EuroBert unless the checkpoint was last trained with CLM. `root`: the
    working root a run's record is found under."""
    from .models.convert import to_hf
    from .models.modeling import MlmClmForCausalLM, MlmClmForMaskedLM

    checkpoint, out = Path(checkpoint), Path(out)
    _check_out(out)
    hf, model_id, state, record = _source(checkpoint, root)
    fmt = fmt or ("llama" if str(state.get("objective", "")).startswith("clm") else "eurobert")
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose eurobert or llama")
    files, left_out = published(hf, state)
    with tempfile.TemporaryDirectory() as view:  # the recorded files alone: nothing added since is read
        for f in files:
            (Path(view) / f.name).symlink_to(f.resolve())
        ours = (MlmClmForMaskedLM if fmt == "eurobert" else MlmClmForCausalLM).from_pretrained(view)
    model = to_hf(ours.eval(), fmt)
    with atomic_path(out, is_dir=True) as tmp:
        model.save_pretrained(tmp)
        for f in files:
            if f.name not in _NOT_COPIED:
                shutil.copyfile(f, tmp / f.name)
        _limit_tokenizer(tmp, ours.config.max_position_embeddings)
        (tmp / "README.md").write_text(model_card(model_id, fmt, state, record, ours.config.to_dict(), str(out)))
        _readable(tmp)
    if left_out:
        print(f"{shown(hf.parent)}: left out of the export, not among the files recorded when the checkpoint was "
              f"saved (added since): {', '.join(left_out)}", flush=True)
    return out


def _export_cli(args) -> int:
    out = export(args.checkpoint, args.out, args.format, root=args.root)
    kind = read_json(out / "config.json")["architectures"][0]
    print(f"{shown(out)}: transformers {kind}, with its tokenizer and a model card (README.md)")
    return 0


def add_options(p) -> None:
    """`mlmclm export`."""
    p.add_argument("checkpoint", help="a run's checkpoint folder (its last step), a step_NNNNNN folder, or its hf/")
    p.add_argument("out", help="the folder to write (new or empty)")
    p.add_argument("--format", choices=sorted(FORMATS), default=None,
                   help="eurobert (bidirectional) or llama (causal); default: llama after CLM, else eurobert")
    p.set_defaults(run=_export_cli)
