"""`mlmclm bench gpu OUT`: the prepared GPU check, one command for the few minutes a lent GPU gives.

It writes `OUT/gpu.csv` (one row a measurement, with the device, torch, commit and the check's wall time), in order
of what matters most, and stops starting new measurements once `--budget` seconds have passed (the rows so far are
written after each one, so a command cut short still leaves them):
1. parity: the model against its transformers twin (`to_hf`: EuroBert and Llama) on the same weights and ids, in bf16
   autocast, as the largest |logit difference| over the logits' spread;
2. MFU and peak memory of the 210M training step at sequence 2048 for MLM-40% and CLM: eager, then compiled
   (`torch.compile`), per micro-batch, per attention backend and per loss-chunk size (`bench.bench_mfu`'s rule);
   then the largest micro-batch of that step that fits (doubled from the first until CUDA runs out of memory);
3. one optimizer step of 610M and of 1B under FSDP with one process, its plugin read from the shipped accelerate
   config (`mlmclm/shipped/accelerate/fsdp.yaml`, what a multi-GPU launch uses);
4. one `small` pretraining step (its recipe's shape and batch).
On a CPU (`--device cpu`, a small `--size` and `--seq-len`) the same code runs in fp32, for tests; FSDP then says it
needs a GPU.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import socket
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import torch

from . import bench
from .config import RECIPES_DIR
from .errors import ConfigError
from .io import check_writable, git_commit, hardware, versions, write_text
from .models import modeling
from .models.configuration import MlmClmConfig
from .models.convert import to_hf
from .models.modeling import MlmClmForMaskedLM
from .sizes import shape
from .training.objectives import IGNORE
from .training.optim import build_optimizer

FSDP_CONFIG = Path(str(resources.files("mlmclm") / "shipped" / "accelerate" / "fsdp.yaml"))
FIELDS = ["check", "size", "variant", "seq_len", "batch", "median_s", "tokens_per_s", "peak_mib", "mfu", "value",
          "note"]


@dataclass
class Check:
    """The rows of one check so far, where they go and its time budget."""
    out: Path
    device: str
    budget: float
    rows: list = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)

    def left(self) -> bool:
        return time.perf_counter() - self.t0 < self.budget

    def add(self, rows: list[dict]) -> None:
        """Keep `rows` and write every row so far to OUT/gpu.csv (atomically)."""
        self.rows += rows
        hw, ver = hardware(), versions()
        context = {"device": hw.get("gpu") or f"cpu x{hw['cpu_count']}", "torch": ver["torch"], "commit": git_commit(),
                   "check_wall_s": f"{time.perf_counter() - self.t0:.0f}"}
        buf = io.StringIO()
        writer = csv.DictWriter(buf, [*FIELDS, *context], extrasaction="ignore")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({**row, **context})
        write_text(self.out / "gpu.csv", buf.getvalue())


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


def mfu_variants(batches: list[int], device: str, chunks: list[int], compiled=(False, True)) -> list[tuple]:
    """(objective, backend, compiled, micro-batch, loss-chunk elements or None): the step variants, in order."""
    backends = ["sdpa", "kernels"] if device == "cuda" else ["sdpa"]
    out = [(o, "sdpa", c, b, None) for c in compiled for b in batches for o in ("MLM40", "CLM")]
    out += [(o, x, False, batches[0], None) for x in backends[1:] for o in ("MLM40", "CLM")]
    out += [("CLM", "sdpa", compiled[-1], batches[0], n) for n in chunks]
    return out


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
    objective, backend, compiled, batch, chunk = variant
    with loss_chunk(chunk):
        rows = bench.bench_mfu(size, seq_len, batch, backends=[backend], objectives=[objective], steps=steps,
                               device=device, peak=peak, compile_model=compiled)
    for r in rows:
        r.update(check="step", mfu=r.pop("ratio", ""), note=f"loss chunk {chunk:,} elements" if chunk else "")
    return rows


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
             "note": f"the largest of {first}, {2 * first}, ... that trains; {stop}"}]


def fsdp_step(size: str, seq_len: int, batch: int, device: str, peak: float, steps: int = 3) -> list[dict]:
    """One optimizer step (median of `steps` after one) of `size` under accelerate's FSDP with one process, the
    plugin from the shipped config; MFU and peak memory."""
    row = {"check": "fsdp", "size": size, "variant": "MLM40 FSDP2 one process", "seq_len": seq_len, "batch": batch}
    if device != "cuda":
        return [{**row, "note": "needs a GPU (accelerate runs FSDP on GPUs only)"}]
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
    accelerator = Accelerator(mixed_precision="bf16", fsdp_plugin=plugin)
    config = MlmClmConfig.from_size(size, max_position_embeddings=max(seq_len, 128), **bench.SPECIAL_IDS)
    model = MlmClmForMaskedLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, config.vocab_size, (batch, seq_len), generator=g).cuda()
    labels = torch.where(torch.rand(ids.shape, generator=g).cuda() < 0.4, ids, IGNORE)
    inputs = ids.masked_fill(labels != IGNORE, config.mask_token_id)
    times = []
    torch.cuda.reset_peak_memory_stats()
    for _ in range(steps + 1):  # the first one untimed
        t = time.perf_counter()
        accelerator.backward(model(inputs, labels=labels).loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    seconds = sorted(times[1:])[len(times[1:]) // 2]
    tokens = batch * seq_len / seconds
    mfu = tokens * config.flops_per_token(seq_len, output_fraction=0.4) / (peak * 1e12)
    return [{**row, "median_s": f"{seconds:.4f}", "tokens_per_s": f"{tokens:.1f}", "mfu": f"{mfu:.4g}",
             "peak_mib": f"{torch.cuda.max_memory_allocated() / 2**20:.0f}"}]


def run(out: Path, device: str = "cuda", size: str = "210m", seq_len: int = 2048, batches=(8, 16),
        chunks=(1 << 23, 1 << 27), fsdp_sizes=("610m", "1b"), small: bool = True, steps: int = 10,
        budget: float = 420.0, peak: float | None = None, compiled=(False, True), max_micro: int = 256) -> Path:
    """The whole check into `out`/gpu.csv (see the module's text); returns the file."""
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench gpu needs a GPU (torch.cuda.is_available() is False); --device cpu tests the code")
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    peak = peak or bench.peak_tflops(name)
    if peak is None:
        raise SystemExit(f"no known bf16 peak for {name!r}: pass --peak-tflops")
    check = Check(Path(out), device, budget)
    work = [("parity", size)] + [("step", v) for v in mfu_variants(list(batches), device, list(chunks),
                                                                     tuple(compiled))]
    work += [("max micro-batch", size)] + [("fsdp", s) for s in fsdp_sizes] + ([("small", None)] if small else [])
    for kind, what in work:
        if not check.left() and kind != "parity":
            check.add([{"check": kind, "variant": str(what), "note": f"not measured: past the {budget:.0f} s budget"}])
            continue
        try:
            if kind == "parity":
                rows = parity(size, min(seq_len, 512), device)
            elif kind == "step":
                rows = measure_step(what, size, seq_len, device, peak, steps)
            elif kind == "max micro-batch":
                rows = largest_micro_batch(size, seq_len, device, max(batches), max_micro)
            elif kind == "fsdp":
                rows = fsdp_step(what, seq_len, max(batches[0] // 2, 1), device, peak)
            else:
                rows = small_step(device, peak, steps)
        except Exception as e:  # one variant this machine cannot run: said in its row, the check goes on
            rows = [{"check": kind, "variant": str(what), "note": f"failed: {type(e).__name__}: "
                     f"{str(e).splitlines()[0][:160] if str(e) else ''}"}]
        check.add(rows)
        if device == "cuda":
            torch.cuda.empty_cache()
    return check.out / "gpu.csv"


def small_step(device: str, peak: float, steps: int) -> list[dict]:
    """One training step of the `small` scale's recipe (its size, sequence and batch), MLM-40%."""
    import yaml

    recipe = yaml.safe_load((RECIPES_DIR / "small.yaml").read_text())
    rows = bench.bench_mfu(recipe["model"]["size"], recipe["data"]["seq_len"], recipe["batch_size"],
                           backends=["sdpa"], objectives=["MLM40"], steps=steps, device=device, peak=peak)
    return [{**r, "check": "small step", "mfu": r.pop("ratio", "")} for r in rows]


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
                   budget=_positive("--budget", args.budget, float), peak=peak, small=not args.no_small)
    check_writable(options["out"])
    return options


def _cli(args) -> int:
    started = time.perf_counter()
    path = run(**_options(args))
    for row in csv.DictReader(path.open()):
        print(f"  {row['check']:<10} {row['size']:<6} {row['variant']:<44} mfu {row['mfu'] or '-':<8} "
              f"peak {row['peak_mib'] or '-':>6} MiB  {row['value'] or ''} {row['note']}")
    print(f"written: {path} ({time.perf_counter() - started:.0f} s)")
    return 0
