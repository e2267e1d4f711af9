"""`mlmclm bench gpu OUT`: the prepared GPU check, one command for the few minutes a lent GPU gives.

It writes `OUT/gpu.csv`, one row a measurement with its own time (`elapsed_s`: the seconds of the fresh process that
measured it, start-up included; `at_s`: when it ended, from the check's start) and the device, torch and commit, and
prints each row as it writes it. The rows no run had measured when the plan was written come first (the H200 run
at 373a46f measured them; `results/bench/gpu.csv` holds each row's latest measurement), then the cheap measurements,
the compiled ones last:
1. the seconds `checkpoints.write_state` takes to record the sha256 of a checkpoint's files, a checkpoint of the last
   FSDP size (1B) written as a pretraining run writes it (accelerate's state after one AdamW step, `hf/` weights) into
   a temporary folder removed after;
2. the compiled 210M CLM step at the larger micro-batches (16);
3. one optimizer step of 610M and of 1B under FSDP2 with one process, compiled (`torch.compile` of the prepared
   model, as `training.build` compiles a run's), its plugin read from the shipped accelerate config
   (`mlmclm/shipped/accelerate/fsdp.yaml`, what a multi-GPU launch uses);
4. parity: the model against its transformers twin (`to_hf`: EuroBert and Llama) on the same weights and ids, in bf16
   autocast, as the largest |logit difference| over the logits' spread;
5. MFU and peak memory of the 210M training step at sequence 2048, eager, at the first micro-batch, MLM-40% and CLM
   (`bench.bench_mfu`'s rule);
6. the largest micro-batch of that step that fits (doubled from the largest given until CUDA runs out of memory);
7. the FSDP2 step of 3., eager;
8. one `small` pretraining step (its recipe's shape and batch);
9. the `kernels` attention backend, the other micro-batches, the loss-chunk sizes, eager;
10. the compiled step (`torch.compile`; the loss's chunk loop stays out of the graph, `modeling.linear_cross_entropy`):
   the first micro-batch, the loss-chunk sizes, MLM-40% at the other micro-batches.
Each measurement runs in a fresh python process stopped, with any process it started, when the `--budget` seconds
from the check's start are spent. A row without a number says why in its note, "not measured: ...": stopped at the
budget (a compile still running then), the budget spent before it started, out of memory, a failure (its error's last
line), or FSDP on a CPU. The command ends within its budget (plus its own start-up). On a CPU (`--device cpu`, a small
`--size` and `--seq-len`) the same code runs in fp32, for tests.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import torch

from . import bench
from .config import RECIPES_DIR
from .errors import ConfigError
from .io import PACKAGE_ROOT, check_writable, git_commit, hardware, versions, write_text
from .models import modeling
from .models.configuration import MlmClmConfig
from .models.convert import to_hf
from .models.modeling import MlmClmForMaskedLM
from .paths import STATE, hf_dir
from .sizes import shape
from .training import checkpoints
from .training.objectives import IGNORE, label_positions
from .training.optim import build_optimizer

FSDP_CONFIG = Path(str(resources.files("mlmclm") / "shipped" / "accelerate" / "fsdp.yaml"))
FIELDS = ["check", "size", "variant", "seq_len", "batch", "median_s", "tokens_per_s", "peak_mib", "mfu", "value",
          "note", "elapsed_s", "at_s"]
OBJECTIVES = ("MLM40", "CLM")


@dataclass
class Check:
    """The rows of one check so far, where they go, its time budget and where each row is shown (`echo`)."""
    out: Path
    budget: float
    echo: Callable[[str], None] = print
    rows: list = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)
    context: dict = field(default_factory=dict)

    def __post_init__(self):
        hw = hardware()
        self.context = {"device": hw.get("gpu") or f"cpu x{hw['cpu_count']}", "torch": versions()["torch"],
                        "commit": git_commit()}

    def left(self) -> float:
        """Seconds left of the budget."""
        return self.budget - (time.perf_counter() - self.t0)

    def add(self, rows: list[dict], elapsed: float) -> None:
        """Keep `rows` (measured in `elapsed` seconds), write every row so far to OUT/gpu.csv (atomically) and show
        the new ones."""
        at = time.perf_counter() - self.t0
        rows = [{**row, "elapsed_s": f"{elapsed:.1f}", "at_s": f"{at:.1f}"} for row in rows]
        self.rows += rows
        buf = io.StringIO()
        writer = csv.DictWriter(buf, [*FIELDS, *self.context], extrasaction="ignore")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({**row, **self.context})
        write_text(self.out / "gpu.csv", buf.getvalue())
        for row in rows:
            self.echo(line(row))


def line(row: dict) -> str:
    """A row as the command prints it."""
    return (f"{row['at_s']:>6} s {row['elapsed_s']:>6} s  {row['check']:<15} {row.get('size') or '':<6} "
            f"{row.get('variant') or '':<46} {row.get('batch') or '':>3}  mfu {row.get('mfu') or '-':<8} "
            f"peak {row.get('peak_mib') or '-':>6} MiB  {row.get('value') or ''} {row.get('note') or ''}")


def parity(size: str, seq_len: int, device: str) -> list[dict]:
    """Max |logit difference| of the model and its transformers twin (same weights) over the logits' std."""
    dev = torch.device(device)
    config = MlmClmConfig.from_size(size, max_position_embeddings=max(seq_len, 128), **bench.SPECIAL_IDS)
    ids = torch.randint(4, config.vocab_size, (2, seq_len), generator=torch.Generator().manual_seed(0)).to(dev)
    torch.manual_seed(0)
    ours = MlmClmForMaskedLM(config).to(dev).eval()
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    rows = []
    for kind, causal in (("eurobert", False), ("llama", True)):
        twin = to_hf(ours, kind).to(dev).eval()
        with torch.no_grad(), autocast:
            a = ours(ids, is_causal=causal).logits.float()
            b = twin(input_ids=ids).logits.float()
        rows.append({"check": "parity", "size": size, "variant": f"{type(twin).__name__} vs mlmclm "
                     f"({'bf16' if dev.type == 'cuda' else 'fp32'})", "seq_len": seq_len, "batch": 2,
                     "value": f"{float((a - b).abs().max() / a.std()):.3g}", "note": "max |diff| / std of logits"})
    return rows


def plan(device: str, peak: float, size: str = "210m", seq_len: int = 2048, batches=(8, 16),
         chunks=(1 << 25, 1 << 29), fsdp_sizes=("610m", "1b"), small: bool = True, steps: int = 10,
         compiled: bool = True, max_micro: int = 256, scratch: str = "") -> list[tuple[str, dict]]:
    """The check's measurements in order (a key of `MEASURES`, its arguments): those no run had measured first
    (the hash of a checkpoint of the last FSDP size, written under `scratch`; the compiled CLM step at the other
    micro-batches; FSDP compiled), then the others, cheap first, compiled last."""
    def step(objective, backend, batch, chunk=None, compile_model=False):
        return ("step", dict(variant=[objective, backend, compile_model, batch, chunk], size=size, seq_len=seq_len,
                             device=device, peak=peak, steps=steps))

    def fsdp(name, compile_model):
        return ("fsdp", dict(size=name, seq_len=seq_len, batch=max(first // 2, 1), device=device, peak=peak,
                             compile_model=compile_model))
    first = batches[0]
    work = [("checkpoint hash", dict(size=fsdp_sizes[-1], folder=scratch, device=device))] if fsdp_sizes else []
    if compiled:
        work += [step("CLM", "sdpa", b, compile_model=True) for b in batches[1:]]
        work += [fsdp(s, True) for s in fsdp_sizes]
    work += [("parity", dict(size=size, seq_len=min(seq_len, 512), device=device))]
    work += [step(o, "sdpa", first) for o in OBJECTIVES]
    work += [("max micro-batch", dict(size=size, seq_len=seq_len, device=device, first=max(batches),
                                      limit=max_micro))]
    work += [fsdp(s, False) for s in fsdp_sizes]
    work += [("small step", dict(device=device, peak=peak, steps=steps))] if small else []
    work += [step(o, "kernels", first) for o in OBJECTIVES] if device == "cuda" else []
    work += [step(o, "sdpa", b) for b in batches[1:] for o in OBJECTIVES]
    work += [step("CLM", "sdpa", first, n) for n in chunks]
    if compiled:
        work += [step(o, "sdpa", first, compile_model=True) for o in OBJECTIVES]
        work += [step("CLM", "sdpa", first, n, compile_model=True) for n in chunks]
        work += [step("MLM40", "sdpa", b, compile_model=True) for b in batches[1:]]
    return work


HASH_VARIANT = "sha256 of its files (checkpoints.write_state)"


def describe(kind: str, args: dict) -> dict:
    """What a row of measurement `kind` with `args` is, before (or without) its numbers."""
    row = {"check": kind, "size": args.get("size", ""), "seq_len": args.get("seq_len", ""),
           "batch": args.get("batch", "")}
    if kind == "step":
        objective, backend, compile_model, row["batch"], chunk = args["variant"]
        row["variant"] = f"{objective} [{backend}]" + (" compiled" if compile_model else "") + chunk_label(chunk)
    elif kind == "fsdp":
        row["variant"] = "MLM40 FSDP2 one process" + (" compiled" if args.get("compile_model") else "")
    elif kind == "checkpoint hash":
        row["variant"] = HASH_VARIANT
    return row


def failure(error: str) -> str:
    """The note of a row whose measurement raised `error` (its last line): out of memory, or what failed."""
    if "OutOfMemoryError" in error:
        return f"not measured: out of memory ({error[:160]})"
    return f"not measured: failed: {error[:200]}"


@contextlib.contextmanager
def loss_chunk(elements: int | None):
    """Logits of at most `elements` at once in the chunked linear cross-entropy (None: the default)."""
    default = modeling.CE_CHUNK_ELEMENTS
    modeling.CE_CHUNK_ELEMENTS = elements or default
    try:
        yield
    finally:
        modeling.CE_CHUNK_ELEMENTS = default


def measure_step(variant: tuple, size: str, seq_len: int, device: str, peak: float, steps: int) -> list[dict]:
    """The row of one step variant (objective, backend, compiled, micro-batch, loss-chunk elements or None)."""
    objective, backend, compiled, batch, chunk = variant
    with loss_chunk(chunk):
        rows = bench.bench_mfu(size, seq_len, batch, backends=[backend], objectives=[objective], steps=steps,
                               device=device, peak=peak, compile_model=compiled)
    for r in rows:  # a variant that raised (out of memory): `bench_mfu` says so in its name, the row in its note
        error = r["variant"].partition(" failed: ")[2]
        r.update(check="step", mfu=r.pop("ratio", ""), variant=describe("step", {"variant": variant})["variant"],
                 **({"note": failure(error)} if error else {}))
    return rows


def chunk_label(elements: int | None) -> str:
    """How a step variant's name says its loss-chunk size (nothing for the default)."""
    return f", loss chunk {elements:,}" if elements else ""


def largest_micro_batch(size: str, seq_len: int, device: str, first: int, limit: int = 256) -> list[dict]:
    """The largest micro-batch (first, 2 first, 4 first, ... up to `limit`) of which one CLM training step (forward,
    backward, fused AdamW; a label at every position) runs on `device` without running out of memory, and its peak
    memory: what `micro_batch_size` can be at `size` and `seq_len` on this GPU (`micro_batch_size: auto` finds it
    for a run)."""
    dev = torch.device(device)
    config = MlmClmConfig.from_size(size, max_position_embeddings=max(seq_len, 128), **bench.SPECIAL_IDS)
    model = MlmClmForMaskedLM(config).to(dev)
    optimizer = build_optimizer(model, 1e-4, (0.9, 0.95), 1e-8, 0.1)
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    fits, peak, batch, stop = None, None, first, f"the last tried: {limit}, the limit"

    def step(batch: int) -> bool:
        ids = torch.randint(4, config.vocab_size, (batch, seq_len), device=dev)
        try:
            with autocast:
                loss = model(ids, labels=ids, is_causal=True).loss
            loss.backward()
            optimizer.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            return True
        except torch.OutOfMemoryError:
            return False

    while batch <= limit:
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        ok = step(batch)  # an out-of-memory's frames are freed once it returns
        optimizer.zero_grad(set_to_none=True)
        if not ok:
            stop = f"{batch} ran out of memory"
            break
        fits = batch
        peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else None
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        batch *= 2
    return [{"check": "max micro-batch", "size": size, "variant": "CLM [sdpa] step, fused AdamW", "seq_len": seq_len,
             "batch": fits if fits is not None else "", "peak_mib": f"{peak:.0f}" if peak is not None else "",
             "note": f"the largest of {first}, {2 * first}, ... that trains; {stop}" if fits is not None
             else f"not measured: {stop}"}]


def fsdp_accelerator():
    """accelerate's `Accelerator` in bf16 under FSDP with one process, the plugin read from the shipped config."""
    import yaml
    from accelerate import Accelerator, FullyShardedDataParallelPlugin

    spec = yaml.safe_load(FSDP_CONFIG.read_text())["fsdp_config"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "LOCAL_RANK": "0",
                       "WORLD_SIZE": "1"}.items():
        os.environ.setdefault(key, value)
    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=spec["fsdp_version"], auto_wrap_policy="transformer_based_wrap",
        transformer_cls_names_to_wrap=[spec["fsdp_transformer_layer_cls_to_wrap"]],
        reshard_after_forward=spec["fsdp_reshard_after_forward"], state_dict_type=spec["fsdp_state_dict_type"])
    return Accelerator(mixed_precision="bf16", fsdp_plugin=plugin)


def fsdp_step(size: str, seq_len: int, batch: int, device: str, peak: float, steps: int = 3,
              compile_model: bool = False) -> list[dict]:
    """One optimizer step (median of `steps` after one, three when compiled) of `size` under accelerate's FSDP with
    one process (`fsdp_accelerator`), MLM-40% with the labelled positions given as a run gives them, compiled after
    `prepare` as `training.build` compiles a run's model; MFU and peak memory."""
    row = describe("fsdp", {"size": size, "seq_len": seq_len, "batch": batch, "compile_model": compile_model})
    if device != "cuda":
        return [{**row, "note": "not measured: on a GPU only (FSDP on CPU processes: tests/test_distributed.py)"}]
    accelerator = fsdp_accelerator()
    config = MlmClmConfig.from_size(size, max_position_embeddings=max(seq_len, 128), **bench.SPECIAL_IDS)
    model = MlmClmForMaskedLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    forward = torch.compile(model) if compile_model else model
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, config.vocab_size, (batch, seq_len), generator=g)
    labels = torch.where(torch.rand(ids.shape, generator=g) < 0.4, ids, IGNORE)
    positions, ids, labels = label_positions(labels).cuda(), ids.cuda(), labels.cuda()
    inputs = ids.masked_fill(labels != IGNORE, config.mask_token_id)
    warmup, times = 3 if compile_model else 1, []
    torch.cuda.reset_peak_memory_stats()
    for _ in range(steps + warmup):  # the first ones untimed
        t = time.perf_counter()
        accelerator.backward(forward(inputs, labels=labels, label_positions=positions).loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    seconds = sorted(times[warmup:])[steps // 2]
    tokens = batch * seq_len / seconds
    mfu = tokens * config.flops_per_token(seq_len, output_fraction=0.4) / (peak * 1e12)
    return [{**row, "median_s": f"{seconds:.4f}", "tokens_per_s": f"{tokens:.1f}", "mfu": f"{mfu:.4g}",
             "peak_mib": f"{torch.cuda.max_memory_allocated() / 2**20:.0f}"}]


def checkpoint_hash(size: str, folder: str, device: str) -> list[dict]:
    """The seconds `checkpoints.write_state` takes to record the sha256 of every file of a `size` checkpoint, as a
    pretraining run records them when it saves one: a checkpoint written as a one-process run writes it (accelerate's
    state after one AdamW step: fp32 weights, optimizer moments, RNG states; then the weights in `hf/`, without a
    tokenizer) into a new folder under `folder` (the system's temporary folder where empty), removed after."""
    from accelerate import Accelerator
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config = MlmClmConfig.from_size(size, **bench.SPECIAL_IDS)
    with torch.device(device):
        model = MlmClmForMaskedLM(config)
    optimizer = build_optimizer(model, 1e-4, (0.9, 0.95), 1e-8, 0.1)
    accelerator = Accelerator(cpu=device != "cuda", mixed_precision="bf16" if device == "cuda" else "no")
    model, optimizer = accelerator.prepare(model, optimizer)
    ids = torch.randint(4, config.vocab_size, (1, 16), device=accelerator.device)
    accelerator.backward(model(ids, labels=ids, is_causal=True).loss)
    optimizer.step()
    path = Path(tempfile.mkdtemp(prefix="checkpoint-", dir=folder or None))
    try:
        t = time.perf_counter()
        accelerator.save_state(str(path))
        accelerator.unwrap_model(model).save_pretrained(hf_dir(path))
        written, t = time.perf_counter() - t, time.perf_counter()
        checkpoints.write_state(path, {"step": 1})
        seconds = time.perf_counter() - t
        files = [f for f in path.rglob("*") if f.is_file() and f.name != STATE]
        gib = sum(f.stat().st_size for f in files) / 2**30
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return [{**describe("checkpoint hash", {"size": size}), "value": f"{seconds:.3g}",
             "note": f"s to hash {len(files)} files, {gib:.3g} GiB ({gib / seconds:.3g} GiB/s), as just written "
                     f"(in {written:.3g} s: accelerate's state after one AdamW step, hf/ weights)"}]


def run(out: Path, device: str = "cuda", budget: float = 480.0, peak: float | None = None, echo=None,
        **options) -> Path:
    """The whole check into `out`/gpu.csv (see the module's text), each row shown by `echo` as it is written;
    `options`: `plan`'s. Returns the file."""
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench gpu needs a GPU (torch.cuda.is_available() is False); --device cpu tests the code")
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    peak = peak or bench.peak_tflops(name)
    if peak is None:
        raise SystemExit(f"no known bf16 peak for {name!r}: pass --peak-tflops")
    check = Check(Path(out), budget, echo or (lambda text: None))
    # every file a measurement writes (the hashed checkpoint, a compile's cache and the compiler's temporary files, also
    # those of a measurement stopped at the budget) goes in one folder, removed at the end
    with tempfile.TemporaryDirectory(prefix="mlmclm-gpu-check-") as scratch:
        for kind, args in plan(device, peak, scratch=scratch, **options):
            left = check.left()
            if left <= 0:
                check.add([{**describe(kind, args), "note": f"not measured: the {budget:.0f} s budget was spent"}], 0)
                continue
            check.add(*in_child(kind, args, left, tmp=scratch))
    return check.out / "gpu.csv"


def in_child(kind: str, args: dict, limit: float, tmp: str = "") -> tuple[list[dict], float]:
    """`MEASURES[kind](**args)` in a fresh python process (this one's, with its -S), its temporary files and compile
    cache in `tmp` where given (each measurement compiles from an empty cache), stopped with every process it started
    (a compile's workers) after `limit` seconds; its rows (one saying why where it gave none) and its wall time."""
    command = [sys.executable, *(["-S"] if sys.flags.no_site else []), "-c",
               "import sys; from mlmclm.gpu_check import _child; _child(sys.argv[1])", json.dumps([kind, args])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))}
    if tmp:  # importing torch set TORCHINDUCTOR_CACHE_DIR in this process's environment to a folder of its TMPDIR
        env.update(TMPDIR=tmp, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "torchinductor"))
    started = time.perf_counter()
    # its own process group, to be stopped with whatever it starts, in this session (whatever ends the session's
    # processes, as a lent machine's command limit does, ends it too); python 3.10 has no `process_group`
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **group)
    try:
        stdout, stderr = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        stdout = None
    finally:  # done, out of time or interrupted: nothing it started outlives it (a compile's workers)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
    elapsed, row = time.perf_counter() - started, describe(kind, args)
    if stdout is None:
        child.communicate()
        return [{**row, "note": f"not measured: stopped at the budget after {elapsed:.0f} s"}], elapsed
    with contextlib.suppress(ValueError, IndexError):
        if child.returncode == 0:
            return json.loads(stdout.strip().splitlines()[-1]), elapsed
    last = (stderr.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
    return [{**row, "note": failure(last)}], elapsed


def _child(spec: str) -> None:
    """In the fresh process of `in_child`: run the measurement `spec` names (JSON of [kind, args]), print its rows."""
    kind, args = json.loads(spec)
    print(json.dumps(MEASURES[kind](**args)))


def small_step(device: str, peak: float, steps: int) -> list[dict]:
    """One training step of the `small` scale's recipe (its size, sequence and batch), MLM-40%."""
    import yaml

    recipe = yaml.safe_load((RECIPES_DIR / "small.yaml").read_text())
    rows = bench.bench_mfu(recipe["model"]["size"], recipe["data"]["seq_len"], recipe["batch_size"],
                           backends=["sdpa"], objectives=["MLM40"], steps=steps, device=device, peak=peak)
    return [{**r, "check": "small step", "mfu": r.pop("ratio", "")} for r in rows]


# what `plan` names, by name (run in a fresh process: `in_child`)
MEASURES = {"parity": parity, "step": measure_step, "max micro-batch": largest_micro_batch, "fsdp": fsdp_step,
            "small step": small_step, "checkpoint hash": checkpoint_hash}


def _positive(option: str, value, kind=int):
    """`value` of `option` when it is a positive (finite) `kind`, else a `ConfigError` naming the option."""
    if isinstance(value, int if kind is int else (int, float)) and 0 < value < float("inf"):
        return value
    raise ConfigError(f"{option} {value}: must be a positive {'integer' if kind is int else 'number'}")


def _options(args) -> dict:
    """`run`'s arguments from the command line's, each checked before any work: a `ConfigError` naming the option
    and what it must be (a positive number, known sizes, an OUT that is a folder one can write in)."""
    try:
        batches = [_positive("--batches", int(b)) for b in args.batches.split(",")]
    except (ValueError, ConfigError):
        raise ConfigError(f"--batches {args.batches!r}: must be positive integers separated by commas, e.g. "
                          "8,16") from None
    sizes = [x for x in args.fsdp_sizes.split(",") if x]
    for option, names in (("--size", [args.size]), ("--fsdp-sizes", sizes)):
        try:
            [shape(name) for name in names]
        except ConfigError as e:
            raise ConfigError(f"{option}: {e}") from None
    peak = None if args.peak_tflops is None else _positive("--peak-tflops", args.peak_tflops, float)
    options = dict(out=Path(args.out), device=args.device, size=args.size, batches=batches, fsdp_sizes=sizes,
                   seq_len=_positive("--seq-len", args.seq_len), steps=_positive("--steps", args.steps),
                   budget=_positive("--budget", args.budget, float), peak=peak, small=not args.no_small,
                   compiled=not args.no_compile)
    check_writable(options["out"])
    return options


def gpu_check_command(args) -> int:
    options = _options(args)
    print(f"{'at_s':>8} {'elapsed':>8}  check, size, variant, batch, MFU, peak memory, value, note "
          f"(budget {options['budget']:.0f} s)", flush=True)
    path = run(**options, echo=lambda text: print(text, flush=True))
    print(f"written: {path}")
    return 0
