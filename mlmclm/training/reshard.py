"""A checkpoint's training state loaded on another process count than wrote it (issue 62): the model and optimizer
resharded between the two layouts accelerate writes.

A run of one process (or of several under DDP) saves its state whole: `model.safetensors` and `optimizer.bin` (the
optimizer's own state dict, its parameters numbered). A run of several processes under FSDP with sharded state (the
shipped accelerate config) saves it with torch.distributed.checkpoint: `pytorch_model_fsdp_0/` and `optimizer_0/`,
one shard a process and metadata that lets any number of processes read it. accelerate's `load_state` reads the
layout of the launch that loads it only. `load_state` below reads either into either: a sharded checkpoint is read
by torch.distributed.checkpoint into whole tensors, a whole one is cut into the shards of this launch
(`set_model_state_dict`, `set_optimizer_state_dict` with the whole state on every process), so a run resumes on
another process count and continues as it would have (within float tolerance: a sum over a batch adds in another
order). The random generators' states are the processes' own and are not carried across: no step of a run draws
from them (its masks come from a generator seeded by the run's seed and the step). A checkpoint of another layout
(FSDP with full state dicts) is read by a launch of that layout only, and refused by any other in one line naming the
process count it was saved with.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from accelerate.utils import DistributedType
from safetensors.torch import load_file
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict, get_optimizer_state_dict,
                                                     set_model_state_dict, set_optimizer_state_dict)

from ..errors import ConfigError

SHARDED = ("pytorch_model_fsdp_0", "optimizer_0")  # accelerate's FSDP sharded state (torch.distributed.checkpoint)
WHOLE = ("model.safetensors", "optimizer.bin")  # accelerate's state of one process, or of DDP
FULL = "pytorch_model_fsdp.bin"  # accelerate's FSDP state with full state dicts (not resharded here)
RNG = "random_states_*.pkl"  # one a process that saved the checkpoint


def saved_processes(path: str | Path) -> int:
    """How many processes wrote the checkpoint `path` (each its own random generators' file)."""
    return len(list(Path(path).glob(RNG)))


def model_entry(accelerator) -> str:
    """The model's file or folder in a checkpoint as accelerate's `load_state` reads it under this launch: `SHARDED`'s
    under FSDP with sharded state, `WHOLE`'s without FSDP, `FULL` under FSDP with full state dicts."""
    if accelerator.distributed_type != DistributedType.FSDP:
        return WHOLE[0]
    return SHARDED[0] if "SHARDED" in str(accelerator.state.fsdp_plugin.state_dict_type) else FULL


def load_state(accelerator, path: str | Path, model, optimizer) -> None:
    """The training state of checkpoint `path` into `model` and `optimizer` (as accelerate prepared them), whatever
    process count wrote it: accelerate's `load_state` when it is in this launch's layout, else resharded from the
    other one; a `ConfigError` naming the process count it was saved with when neither reads it."""
    path, here = Path(path), model_entry(accelerator)
    optimizer = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper: the torch optimizer inside
    if (path / here).exists():
        accelerator.load_state(str(path))
    elif here == WHOLE[0] and (path / SHARDED[0]).is_dir():
        _sharded_into_whole(path, model, optimizer)
    elif here == SHARDED[0] and (path / WHOLE[0]).is_file():
        _whole_into_sharded(path, model, optimizer, accelerator.unwrap_model(model))
    else:
        saved = saved_processes(path) or "an unknown number of"
        raise ConfigError(f"checkpoint {path} was saved by {saved} process(es) in a layout this launch of "
                          f"{accelerator.num_processes} does not read (it reads {here}); resume it with {saved} "
                          "process(es) and the accelerate config it was saved with")


def _sharded_into_whole(path: Path, model, optimizer) -> None:
    """A checkpoint saved sharded (FSDP) read into a model and optimizer held whole on this process."""
    weights = _read({"model": get_model_state_dict(model)}, path / SHARDED[0])
    set_model_state_dict(model, weights["model"])
    state = _read({"optimizer": get_optimizer_state_dict(model, optimizer)}, path / SHARDED[1])
    set_optimizer_state_dict(model, optimizer, state["optimizer"])


def _read(state: dict, folder: Path) -> dict:
    """`state` (its tensors as this process holds them) read from the torch.distributed.checkpoint folder `folder`;
    in one process without a process group, without torch's warning that it reads in one process (it is meant)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(state, checkpoint_id=folder)
    return state


def _whole_into_sharded(path: Path, model, optimizer, unwrapped) -> None:
    """A checkpoint saved whole read by every process, each keeping its shard: the optimizer's numbered parameters
    named first (the n-th of a group is the n-th of the same group here: the optimizer is built alike)."""
    whole = StateDictOptions(full_state_dict=True)
    weights = load_file(path / WHOLE[0])
    set_model_state_dict(model, weights, options=whole)
    saved = torch.load(path / WHOLE[1], weights_only=True)
    names = {id(p): n for n, p in unwrapped.named_parameters()}
    named = {i: names[id(p)] for old, new in zip(saved["param_groups"], optimizer.param_groups)
             for i, p in zip(old["params"], new["params"])}
    state = {"state": {named[i]: s for i, s in saved["state"].items()},
             "param_groups": [{**g, "params": [named[i] for i in g["params"]]} for g in saved["param_groups"]]}
    set_optimizer_state_dict(model, optimizer, state, options=whole)
