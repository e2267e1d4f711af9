"""What a pretraining run is made of before its first step, built from its config in this order:

1. `start_accelerator`: the accelerator (bf16 on a GPU unless `precision` says fp32), its processes checked against
   the launch and the batch, the tracker started;
2. `build`: what trains (`Built`): the tokenizer and token blocks (`tokenizer.prepare_tokenizer`,
   `shards.prepare_shards`; built by a run of one process, found prepared by a launch of several:
   `check_data_prepared`; checked against their record and the model: `check_init_vocabulary`), the model
   (`build_model`: from scratch, a run's checkpoint or a transformers decoder, `models.convert.load_hf_decoder`)
   and its optimizer (`run_optimizer`), prepared by accelerate;
3. `micro_batch_from_memory` (with `micro_batch_size: auto`, once the run's state is loaded): the largest
   micro-batch whose forward and backward fit the GPU beside the optimizer's state.

`mlmclm.training.pretrain.Trainer` trains what is built; `distributed_setup` says how they are spread, as meta.json
records it.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from .. import store
from ..config import OptimSpec, PretrainConfig, to_yaml
from ..errors import ConfigError
from ..io import launched
from ..models.configuration import MlmClmConfig
from ..models.convert import from_hf, load_hf_decoder
from ..models.modeling import MlmClmForMaskedLM
from ..paths import hf_dir
from ..schedule import Schedule
from . import trackers
from .optim import build_optimizer
from .shards import TokenBlocks, prepare_shards, shards_dir
from .tokenizer import prepare_tokenizer, tokenizer_on_disk


def start_accelerator(cfg: PretrainConfig, run_dir: Path, report_to: str):
    """The run's accelerator (bf16 on a GPU unless precision says fp32), its processes checked against the launch
    and the batch, and the tracker `report_to` started (its files in `run_dir`)."""
    from accelerate import Accelerator

    on_gpu = torch.cuda.is_available()
    precision = {"auto": "bf16" if on_gpu else "no", "bf16": "bf16", "fp32": "no"}[cfg.precision]
    accelerator = Accelerator(mixed_precision=precision, cpu=not on_gpu,
                              **trackers.accelerator_kwargs(report_to, run_dir))
    if fsdp_asked() and not on_gpu and accelerator.num_processes > 1:
        shard_on_cpu(accelerator)
    kind = distributed_setup(accelerator)["type"]
    if fsdp_asked() and kind != "FSDP":
        raise ConfigError(f"accelerate launch --use_fsdp: accelerate runs this as {kind}, not FSDP; launch FSDP "
                          "with two processes or more (one process has nothing to shard: drop --use_fsdp)")
    trackers.start(accelerator, report_to, cfg.run_id, to_yaml(cfg))
    world = accelerator.num_processes
    if cfg.micro_batch_size == "auto":
        if kind == "FSDP":
            raise ConfigError("micro_batch_size: auto is not for FSDP (its trial forward passes are collective: one "
                              "GPU out of memory would stall the others); set micro_batch_size to a number")
        if cfg.batch_size % world:
            raise ConfigError(f"batch_size ({cfg.batch_size}) must be a multiple of the {world} processes")
    elif cfg.batch_size % (world * cfg.micro_batch_size):
        raise ConfigError(f"batch_size ({cfg.batch_size}) must be a multiple of processes x micro_batch_size "
                          f"({world} x {cfg.micro_batch_size})")
    return accelerator


def fsdp_asked() -> bool:
    """Whether the launch asks for FSDP (`accelerate launch --use_fsdp`, or an FSDP config file)."""
    return os.environ.get("ACCELERATE_USE_FSDP", "").lower() in ("true", "1")


def shard_on_cpu(accelerator) -> None:
    """FSDP2 over CPU processes (gloo). accelerate turns an FSDP launch on CPUs into DDP (its FSDP switch is for GPU
    process types), while torch's FSDP2 (`fully_shard`) shards on CPU as on GPUs: the process state and the
    accelerator's state are set to FSDP, with the plugin of the launch's FSDP settings, before anything is prepared,
    so `prepare`, `save_state` and `load_state` take their FSDP paths. FSDP1 is refused there (untried on CPU)."""
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    plugin = FullyShardedDataParallelPlugin()  # from the launch's FSDP_* settings
    if plugin.fsdp_version != 2:
        raise ConfigError(f"FSDP version {plugin.fsdp_version} is not run on CPU processes here (FSDP2 is); launch "
                          "FSDP2: --fsdp_version 2, or fsdp_version: 2 in the config file, as mlmclm/shipped/"
                          "accelerate/fsdp.yaml has")
    PartialState().distributed_type = DistributedType.FSDP
    accelerator.state.distributed_type = DistributedType.FSDP
    accelerator.state.fsdp_plugin = plugin


def distributed_setup(accelerator) -> dict:
    """How the run is spread over processes, as meta.json records it: accelerate's distributed type (NO, MULTI_CPU,
    MULTI_GPU, FSDP, ...), the processes, the collective backend and, under FSDP, its version and sharding."""
    state = accelerator.state
    setup = {"type": str(getattr(state.distributed_type, "value", state.distributed_type)),
             "processes": accelerator.num_processes, "backend": getattr(state, "backend", None)}
    plugin = getattr(state, "fsdp_plugin", None)
    if plugin is not None:
        sharding = getattr(plugin, "sharding_strategy", None)
        setup["fsdp"] = {"version": getattr(plugin, "fsdp_version", 1),
                         "sharding": str(getattr(sharding, "name", sharding)),
                         "reshard_after_forward": str(getattr(plugin, "reshard_after_forward", None))}
    return setup


@dataclass(frozen=True)
class Built:
    """What a run trains, as `build` makes them."""
    tokenizer: Any
    shards: Path  # the token shards' folder (its meta.json goes into the run's)
    blocks: TokenBlocks
    model: Any  # as accelerate prepared it (and torch.compile compiled it): what trains
    unwrapped: MlmClmForMaskedLM
    optimizer: Any


def build(cfg: PretrainConfig, schedule: Schedule, accelerator, root: Path) -> Built:
    """The tokenizer and the token blocks (the main process builds them first, the others then find them built),
    the model and its optimizer, prepared by accelerate (`root`: the working root, where an init run's record is
    found)."""
    hf_model = hf_tok = None
    if cfg.init.kind == "hf":
        hf_model, hf_tok = load_hf_decoder(cfg.init.path, cfg.init.gguf_file)
    # one process builds what is missing; a multi-process launch finds it prepared (`check_data_prepared`)
    tokenizer = prepare_tokenizer(cfg, hf_tok, build=not launched(), root=root)
    check_init_vocabulary(cfg, tokenizer, root)
    if any(o.has_mlm for o, _ in schedule.phases) and tokenizer.mask_token_id is None:
        raise ConfigError(f"the tokenizer {cfg.data.tokenizer!r} has no mask token and the run has an MLM "
                          f"phase; set data.mask_token to an existing token (e.g. "
                          f"'<|reserved_special_token_0|>' for Llama-3)")
    shards = prepare_shards(cfg, tokenizer, build=not launched(), root=root)
    blocks = TokenBlocks(shards / "train.bin", cfg.data.seq_len, cfg.data.seed)
    if blocks.n < cfg.batch_size:
        raise ConfigError(f"data.corpus={cfg.data.corpus!r} holds {blocks.n} block(s) of data.seq_len="
                          f"{cfg.data.seq_len} tokens, fewer than one batch of {cfg.batch_size}; lower "
                          f"data.seq_len or batch_size, or give a larger corpus")
    model = build_model(cfg, tokenizer, hf_model, root)
    del hf_model
    optimizer = run_optimizer(model, cfg.optim, accelerator.device)  # accelerate moves the model there
    model, optimizer = accelerator.prepare(model, optimizer)
    if cfg.compile:
        model = torch.compile(model)
    return Built(tokenizer, shards, blocks, model, accelerator.unwrap_model(model), optimizer)


def check_data_prepared(cfg: PretrainConfig, root: Path) -> None:
    """Before any folder is made (`pretrain`'s checks before work, `--dry-run`'s too): the data the run would read,
    checked against its record and the model (`shards.prepare_shards`: whole, made by the run's tokenizer, no id
    past its vocabulary; `check_init_vocabulary`). Under a multi-process launch, on every process before any
    barrier, the tokenizer and shards must be there, else one line saying how to prepare them (`mlmclm data`): a
    launch never builds data (its other processes would wait at a barrier while the main one tokenises). A run of
    one process checks what it finds on disk; what is missing `build` makes and checks. `root`: the working root
    `cfg` is resolved against."""
    alone = not launched()
    if alone and (cfg.init.kind == "hf" or not tokenizer_on_disk(cfg.data)):
        return  # made (or downloaded) by `build`, which checks it then
    hf_tok = load_hf_decoder(cfg.init.path, cfg.init.gguf_file, model=False)[1] if cfg.init.kind == "hf" else None
    tokenizer = prepare_tokenizer(cfg, hf_tok, build=False, root=root)
    check_init_vocabulary(cfg, tokenizer, root)
    if not alone or shards_dir(cfg, tokenizer).exists():
        prepare_shards(cfg, tokenizer, build=False, root=root)


def check_init_vocabulary(cfg: PretrainConfig, tokenizer, root: Path) -> None:
    """A run that starts from a run's checkpoint (init.kind=run) trains its embeddings on the run's tokens: the
    checkpoint's vocabulary must be the run's tokenizer's, else one line saying so (an id past it would crash a
    step; a smaller one would give the tokens other meanings)."""
    if cfg.init.kind != "run":
        return
    src = store.find_checkpoint(cfg.init.path, root, cfg.init.step)
    vocab = MlmClmConfig.from_pretrained(hf_dir(src)).vocab_size
    if vocab != len(tokenizer):
        raise ConfigError(f"init checkpoint {src} has a {vocab:,}-token vocabulary, the run's tokenizer "
                          f"{len(tokenizer):,} (data.tokenizer={cfg.data.tokenizer}, data.vocab_size="
                          f"{cfg.data.vocab_size}); set data.tokenizer and data.vocab_size to those its run was "
                          "trained with")


def build_model(cfg: PretrainConfig, tokenizer, hf_model, root: Path) -> MlmClmForMaskedLM:
    """The model a run starts from (seeded by `cfg.seed`): its init checkpoint, the transformers decoder `hf_model`
    converted (its embeddings resized to the tokenizer), or a new model of `model.size`; with the tokenizer's
    special ids and the run's attention backend."""
    torch.manual_seed(cfg.seed)
    if cfg.init.kind == "run":
        src = store.find_checkpoint(cfg.init.path, root, cfg.init.step)
        model = MlmClmForMaskedLM.from_pretrained(hf_dir(src))
    elif cfg.init.kind == "hf":
        body = from_hf(hf_model)  # fp32 already (load_hf_decoder); a GGUF model refuses .float()
        with torch.device("meta"):
            model = MlmClmForMaskedLM(copy.deepcopy(body.config))
        model.load_state_dict(body.state_dict(), assign=True)
        if model.config.tie_word_embeddings:
            model.tie_weights()
        if len(tokenizer) != model.config.vocab_size:
            model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
            model.config.vocab_size = len(tokenizer)
    else:
        config = MlmClmConfig.from_size(cfg.model.size, **{**cfg.model.overrides, "vocab_size": len(tokenizer)})
        model = MlmClmForMaskedLM(config)
    c = model.config
    c.pad_token_id, c.bos_token_id = tokenizer.pad_token_id, tokenizer.bos_token_id
    c.eos_token_id, c.mask_token_id = tokenizer.eos_token_id, tokenizer.mask_token_id
    c.attention_backend = cfg.model.attention_backend
    if cfg.data.seq_len > c.max_position_embeddings:
        raise ConfigError(f"data.seq_len ({cfg.data.seq_len}) exceeds the model's max_position_embeddings "
                          f"({c.max_position_embeddings})")
    return model


def fitting_micro_batch(local: int, fits: Callable[[int], bool]) -> int:
    """The largest divisor of `local` (a process's sequences a step) for which `fits` holds, tried from `local` down;
    ConfigError when none does."""
    for micro in (d for d in range(local, 0, -1) if local % d == 0):
        if fits(micro):
            return micro
    raise ConfigError("micro_batch_size: auto: not one sequence's forward and backward fits this GPU's memory; use a "
                      "smaller model or data.seq_len, or more GPUs under FSDP")


def micro_batch_from_memory(cfg: PretrainConfig, built: Built, accelerator) -> int:
    """`micro_batch_size: auto` on a GPU: the largest micro-batch (a divisor of batch_size / processes) whose forward
    and backward run, tried on random tokens at data.seq_len with a label at every position (the largest loss of any
    objective) beside the optimizer's state (room held for AdamW's two moments when no step has made them yet); the
    smallest of the processes' answers. Weights, gradients and random generators are left as they were."""
    model, device = built.model, accelerator.device
    config = built.unwrapped.config
    params = [p for p in model.parameters() if p.requires_grad]
    ids = torch.randint(0, config.vocab_size, (cfg.batch_size // accelerator.num_processes, cfg.data.seq_len),
                        generator=torch.Generator().manual_seed(0)).to(device)

    def trial(micro: int) -> bool:
        moments = ([torch.empty_like(p, dtype=torch.float32) for p in params for _ in range(2)]
                   if not built.optimizer.state else [])
        try:
            with accelerator.no_sync(model), accelerator.autocast():
                loss = model(input_ids=ids[:micro], labels=ids[:micro], is_causal=True).loss
                accelerator.backward(loss)
            torch.cuda.synchronize(device)
            return True
        except torch.OutOfMemoryError:
            return False
        finally:
            del moments

    def fits(micro: int) -> bool:
        ok = trial(micro)  # what the trial held (an out-of-memory's frames included) is freed once it returns
        model.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        return ok

    found = fitting_micro_batch(len(ids), fits)
    return int(accelerator.gather(torch.tensor([found], device=device)).min())


def run_optimizer(model, o: OptimSpec, device=None) -> torch.optim.AdamW:
    """The run's AdamW from its `optim` section (`optim.build_optimizer`: norms without weight decay)."""
    return build_optimizer(model, o.lr, o.betas, o.eps, o.weight_decay, device)
