"""Benchmarks, measured side by side: same shapes, same batch, interleaved repetitions after warm-up, medians and
ratios. Results go to `results/bench/<name>.csv` with hardware, versions, commit and wall time.

    mlmclm bench pretrain [--sizes tiny mini-m] [--seq-len 128] [--batch 16] [--reps 10]
    mlmclm bench memory [--size mini-m] [--vocab 128256]
    mlmclm bench finetune [--dataset multiemo_sentiment] [--lrs 6] [--seeds 5] [--size mini-m]
    mlmclm bench notebooks
    mlmclm bench mfu [--size 210m] [--seq-len 2048] [--backends sdpa,flex,kernels,eager]   (a GPU)

Pretraining step throughput (forward, backward, AdamW step), each group of compared variants in a fresh process:
- mlmclm MLM (40% masking) with the sparse head vs the same model with a dense head, and vs transformers'
  `EuroBertForMaskedLM` of the same shape (dense logits);
- mlmclm CLM vs transformers' `LlamaForCausalLM` of the same shape;
- mlmclm MLM and CLM with each attention backend this CPU runs (sdpa, eager, kernels).
Peak memory of one CLM training step (forward + backward) at the paper's 128k vocabulary, each variant in a fresh
process (the growth of the process's peak resident memory over what it held before the step).
A fine-tuning grid (learning rates x seeds, one model, one dataset, the `mini` protocol) run as separate processes
(one `mlmclm finetune` a run), one run after another in one process, and on worker processes; the per-run results of
each way against the one-process reference; the padding of the grid's training batches without and with length
grouping. On a GPU, the model FLOPs utilisation of the paper's 210M shape at sequence 2048 in bf16, per attention
backend (`bench mfu`).
"""

from __future__ import annotations

import copy
import csv
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .config import FinetuneConfig, ScaleConfig, finetune_config, scale_config
from .evaluation.checkpoint import max_length, open_checkpoint
from .evaluation.finetune import batch_plan, feature_length, run_grid
from .evaluation.groups import encode
from .evaluation.offline_suite import build_offline
from .evaluation.tasks import SUITES, load_task, tasks_dir
from .models.configuration import MlmClmConfig
from .io import PACKAGE_ROOT, git_commit, hardware, versions, working_root, write_text
from .models.modeling import MlmClmForMaskedLM
from .paths import RESULTS
from .training.objectives import IGNORE, clm_labels, label_positions
from .training.tokenizer import load_tokenizer, train_tokenizer


# The benchmarks' batches are random token ids without a tokenizer: ids 0-3 are the special tokens, in a trained
# tokenizer's order (pad, bos, eos, mask: `tokenizer.SPECIAL_TOKENS`), text tokens are drawn from 4 up. The model
# configs the benchmarks build carry these ids; the masked inputs and transformers' twins take them from there.
SPECIAL_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, mask_token_id=3)


def _hf_twin(config: MlmClmConfig, kind: str):
    from transformers import EuroBertConfig, EuroBertForMaskedLM, LlamaConfig, LlamaForCausalLM

    shape = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                 intermediate_size=config.intermediate_size, num_hidden_layers=config.num_hidden_layers,
                 num_attention_heads=config.num_attention_heads, num_key_value_heads=config.num_key_value_heads,
                 max_position_embeddings=config.max_position_embeddings, attn_implementation="sdpa",
                 tie_word_embeddings=False)
    if kind == "llama":
        return LlamaForCausalLM(LlamaConfig(**shape))
    return EuroBertForMaskedLM(EuroBertConfig(**shape, mask_token_id=config.mask_token_id,
                                              pad_token_id=config.pad_token_id, bos_token_id=config.bos_token_id,
                                              eos_token_id=config.eos_token_id))


MLM, CLM = "mlmclm MLM40 sparse head", "mlmclm CLM"
BACKENDS_ON_CPU = ("sdpa", "eager", "kernels")  # flex has no backward pass on CPU
# Variants measured side by side, each group in a fresh process: models of other groups in the same process
# (allocator and cache state) shifted a group's timings by up to 30% on this CPU.
PRETRAIN_GROUPS = {
    "MLM": [MLM, "mlmclm MLM40 dense head", "transformers EuroBertForMaskedLM MLM40"],
    "CLM": [CLM, "transformers LlamaForCausalLM CLM"],
    "MLM backends": [MLM] + [f"{MLM} [{b}]" for b in BACKENDS_ON_CPU[1:]],
    "CLM backends": [CLM] + [f"{CLM} [{b}]" for b in BACKENDS_ON_CPU[1:]],
}
RATIOS = [("MLM40 sparse / dense head", MLM, "mlmclm MLM40 dense head"),
          ("MLM40 mlmclm / EuroBertForMaskedLM", MLM, "transformers EuroBertForMaskedLM MLM40"),
          ("CLM mlmclm / LlamaForCausalLM", CLM, "transformers LlamaForCausalLM CLM")]
RATIOS += [(f"{obj} {b} / sdpa", f"{name} [{b}]", name)
           for b in BACKENDS_ON_CPU[1:] for obj, name in (("MLM40", MLM), ("CLM", CLM))]


def _step(name: str, config: MlmClmConfig, seq_len: int, batch: int, seed: int = 0):
    """A function doing one training step (forward, backward, AdamW) of variant `name`; every variant gets the
    same batch and the same masking."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, config.vocab_size, (batch, seq_len), generator=g)
    selected = torch.rand(ids.shape, generator=g) < 0.4
    mlm_labels = torch.where(selected, ids, IGNORE)
    mlm_inputs = ids.masked_fill(selected, config.mask_token_id)
    next_tokens = clm_labels(ids, shift=True)
    torch.manual_seed(seed)
    backend = name.split("[")[1].rstrip("]") if "[" in name else "sdpa"
    if name.startswith("transformers"):
        model = _hf_twin(config, "llama" if "Llama" in name else "eurobert")
        loss_fn = ((lambda m: m(ids, labels=ids).loss) if "Llama" in name else
                   (lambda m: m(mlm_inputs, labels=mlm_labels).loss))
    else:
        model = MlmClmForMaskedLM(copy.deepcopy(config))  # its own config: the backend is set on the config
        model.set_attention_backend(backend)
        if name.startswith(CLM):
            loss_fn = lambda m: m(ids, labels=next_tokens, is_causal=True).loss  # noqa: E731
        elif "dense head" in name:
            loss_fn = lambda m: F.cross_entropy(m(mlm_inputs).logits.flatten(0, 1).float(),  # noqa: E731
                                                mlm_labels.flatten(), ignore_index=IGNORE)
        else:
            loss_fn = lambda m: m(mlm_inputs, labels=mlm_labels, is_causal=False).loss  # noqa: E731
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-5, weight_decay=0.1)

    def step():
        loss = loss_fn(model)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def _pretrain_probe(size: str, group: str, seq_len: int, batch: int, reps: int, block: int = 3) -> None:
    """Run in a fresh process: one group's variants in rounds (in a rotating order); in each round every variant does
    one untimed step, then `block` timed ones (the machine's noise hits every variant alike). Prints the median
    seconds a step."""
    config = MlmClmConfig.from_size(size, max_position_embeddings=max(seq_len, 128), **SPECIAL_IDS)
    steps = {name: _step(name, config, seq_len, batch) for name in PRETRAIN_GROUPS[group]}
    times = {name: [] for name in steps}
    names = list(steps)
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:  # no variant always goes first
            step = steps[name]
            step()
            for _ in range(block):
                t = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - t)
    print(json.dumps({name: statistics.median(ts) for name, ts in times.items()}))


def bench_pretrain(sizes=("tiny", "mini-m"), seq_len: int = 128, batch: int = 16, reps: int = 10,
                   threads: int | None = None):
    rows = []
    for size in sizes:
        medians = {}
        for group in PRETRAIN_GROUPS:
            code = (f"import torch; torch.set_num_threads({threads or torch.get_num_threads()}); "
                    f"from mlmclm.bench import _pretrain_probe; "
                    f"_pretrain_probe({size!r}, {group!r}, {seq_len}, {batch}, {reps})")
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 cwd=PACKAGE_ROOT).stdout  # this mlmclm, whichever the working folder
            for name, med in json.loads(out.strip().splitlines()[-1]).items():
                medians.setdefault(name, {})[group] = med
        tokens = batch * seq_len
        for name, by_group in medians.items():
            for group, med in by_group.items():
                rows.append({"bench": "pretrain_step", "size": size, "variant": f"{name} ({group} group)",
                             "seq_len": seq_len, "batch": batch, "median_s": f"{med:.5f}",
                             "tokens_per_s": f"{tokens / med:.0f}", "reps": reps})
        for label, num, den in RATIOS:
            group = next(g for g, names in PRETRAIN_GROUPS.items() if num in names and den in names)
            rows.append({"bench": "pretrain_ratio", "size": size, "variant": label, "seq_len": seq_len,
                         "batch": batch, "ratio": f"{medians[den][group] / medians[num][group]:.3f}", "reps": reps})
    return rows


# Dense bf16 tensor-core peaks: NVIDIA's H100 and H200 data sheets give them with 2:4 sparsity (SXM 1,979, NVL 1,671,
# H100 PCIe 1,513 TFLOP/s), halved here; the A100's 312 is dense. The first entry all of whose words are in the name
# wins, so each NVL and PCIe card comes before its SXM model's plain name.
PEAK_BF16_TFLOPS = {"H100 NVL": 835.5, "H200 NVL": 835.5, "H100 PCIe": 756.0, "H100": 989.4, "H200": 989.4,
                    "A100": 312.0}


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a known GPU from its name (`torch.cuda.get_device_name()`), else None."""
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if all(w in device_name for w in k.split())), None)


def bench_mfu(size: str = "210m", seq_len: int = 2048, batch: int = 8, backends=("sdpa", "flex", "kernels", "eager"),
              objectives=("MLM40", "CLM"), steps: int = 10, warmup: int = 3, device: str = "cuda",
              peak: float | None = None, compile_model: bool = False) -> list[dict]:
    """Model FLOPs utilisation of training steps (forward, backward, fused AdamW) of the `size` model at `seq_len`, in
    bf16 autocast on a GPU (fp32 on a CPU, for testing): tokens/s x model FLOPs a token / the device's peak. Model
    FLOPs: 6 x the body's weights + attention scores at full context + the output layer on the labelled positions
    (40% for MLM: the sparse head computes no more)."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench mfu needs a GPU (torch.cuda.is_available() is False); --device cpu tests the code")
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    peak = peak or peak_tflops(name)
    if peak is None:
        raise SystemExit(f"no known bf16 peak for {name!r}: pass --peak-tflops")
    config = MlmClmConfig.from_size(size, max_position_embeddings=max(seq_len, 128), **SPECIAL_IDS)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, config.vocab_size, (batch, seq_len), generator=g).to(dev)
    selected = (torch.rand(ids.shape, generator=g) < 0.4).to(dev)
    labels = {"MLM40": torch.where(selected, ids, IGNORE), "CLM": clm_labels(ids, shift=True)}
    inputs = {"MLM40": ids.masked_fill(selected, config.mask_token_id), "CLM": ids}
    rows = []
    for backend in backends:
        for objective in objectives:
            fraction = float((labels[objective] != IGNORE).float().mean())
            flops_token = config.flops_per_token(seq_len, output_fraction=fraction)  # the rule: mlmclm.flops
            try:
                seconds = _median_step_seconds(config, backend, inputs[objective], labels[objective],
                                               objective == "CLM", dev, steps, warmup, compile_model)
            except Exception as e:  # a backend this machine cannot run: say so in the table, go on
                rows.append({"bench": "mfu", "size": size, "variant": f"{objective} [{backend}] failed: "
                             f"{type(e).__name__}: {str(e).splitlines()[0][:120]}", "seq_len": seq_len, "batch": batch})
                continue
            tokens = batch * seq_len / seconds
            rows.append({"bench": "mfu", "size": size, "variant": f"{objective} [{backend}]"
                         + (" compiled" if compile_model else ""), "seq_len": seq_len, "batch": batch,
                         "median_s": f"{seconds:.4f}", "tokens_per_s": f"{tokens:.1f}",
                         "peak_mib": f"{torch.cuda.max_memory_allocated(dev) / 2**20:.0f}" if dev.type == "cuda" else "",
                         "ratio": f"{tokens * flops_token / (peak * 1e12):.4g}", "reps": steps})
    return rows


def _median_step_seconds(config: MlmClmConfig, backend: str, ids, labels, is_causal: bool, dev: torch.device,
                         steps: int, warmup: int, compile_model: bool) -> float:
    """The median wall time of a training step (forward, backward, fused AdamW; bf16 autocast on a GPU) of a fresh
    model on `backend`, after `warmup` steps; the GPU's peak memory counted from the first timed step."""
    torch.manual_seed(0)
    model = MlmClmForMaskedLM(copy.deepcopy(config)).to(dev)
    model.set_attention_backend(backend)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    fwd = torch.compile(model) if compile_model else model
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")

    positions = label_positions(labels)  # once, outside the timed steps, as the pretraining loop does on the host

    def step():
        with autocast:
            loss = fwd(ids, labels=labels, is_causal=is_causal, label_positions=positions).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    sync = torch.cuda.synchronize if dev.type == "cuda" else lambda: None
    for _ in range(warmup):
        step()
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


MEMORY_VARIANTS = ("mlmclm CLM", "transformers LlamaForCausalLM CLM")


def _memory_probe(variant: str, size: str, vocab: int, seq_len: int, batch: int) -> None:
    """Run in a fresh process: print the growth of peak RSS (MiB) over one CLM training step."""
    torch.manual_seed(0)
    config = MlmClmConfig.from_size(size, vocab_size=vocab, max_position_embeddings=max(seq_len, 128))
    ids = torch.randint(4, vocab, (batch, seq_len))
    if variant == "mlmclm CLM":
        model = MlmClmForMaskedLM(config)
        labels = clm_labels(ids, shift=True)
        step = lambda: model(ids, labels=labels, is_causal=True).loss.backward()  # noqa: E731
    else:
        model = _hf_twin(config, "llama")
        step = lambda: model(ids, labels=ids).loss.backward()  # noqa: E731
    for p in model.parameters():  # gradients allocated up front, as after a first step
        p.grad = torch.zeros_like(p)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_step_mib": (after - before) / 1024}))


def bench_memory(size: str = "mini-m", vocab: int = 128_256, seq_len: int = 128, batch: int = 16) -> list[dict]:
    peaks = {}
    for variant in MEMORY_VARIANTS:
        code = (f"from mlmclm.bench import _memory_probe; "
                f"_memory_probe({variant!r}, {size!r}, {vocab}, {seq_len}, {batch})")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        peaks[variant] = json.loads(out.strip().splitlines()[-1])["peak_step_mib"]
    rows = [{"bench": "clm_step_peak_mib", "size": f"{size} vocab {vocab}", "variant": v, "seq_len": seq_len,
             "batch": batch, "peak_mib": f"{peaks[v]:.0f}", "reps": 1}
            for v in MEMORY_VARIANTS]
    rows.append({"bench": "clm_step_peak_ratio", "size": f"{size} vocab {vocab}", "variant": "CLM mlmclm / Llama",
                 "seq_len": seq_len, "batch": batch,
                 "ratio": f"{peaks[MEMORY_VARIANTS[0]] / peaks[MEMORY_VARIANTS[1]]:.3f}", "reps": 1})
    return rows


def bench_notebooks(reps: int = 1, root: Path | None = None) -> list[dict]:
    """Wall time of `mlmclm notebooks` (all five notebooks: every figure and table) in the working root `root`
    (default `io.working_root()`), in a fresh process."""
    root, times = root or working_root(), []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mlmclm.analysis.drawing.notebooks"], cwd=root, check=True,
                       capture_output=True)
        times.append(time.perf_counter() - t)
    return [{"bench": "notebooks_wall_s", "size": "", "variant": "mlmclm notebooks (5 notebooks)",
             "median_s": f"{statistics.median(times):.1f}", "reps": reps}]


FINETUNE_LRS = (1e-4, 2e-4, 3e-4, 5e-4, 1e-3, 2e-3)  # the grid's learning rates (the first `lrs` of them)


def random_checkpoint(path: Path, texts, vocab_size: int = 512, seed: int = 0, size: str = "tiny",
                      **config) -> Path:
    """A randomly initialised MlmClmForMaskedLM of `size` with the byte-level BPE a pretraining run would train on
    `texts` (`tokenizer.train_tokenizer`), saved in transformers format in `path` (what fine-tuning reads): the model
    `bench_finetune` times (the tests fine-tune it too)."""
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix="mlmclm-tokenizer-") as tmp:
        tok = load_tokenizer(str(train_tokenizer(iter(texts), vocab_size, Path(tmp))))
    torch.manual_seed(seed)
    cfg = MlmClmConfig.from_size(size, vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                 bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                 mask_token_id=tok.mask_token_id, **config)
    MlmClmForMaskedLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def bench_finetune(dataset: str = "multiemo_sentiment", lrs: int = 6, seeds: int = 5, size: str = "mini-m",
                   data_dir: str | None = None, reps: int = 1) -> list[dict]:
    """R = lrs x seeds fine-tuning runs of one randomly initialised `size` model on `dataset` with the `mini` protocol,
    run as R separate `mlmclm finetune` processes (one a run, as a shell loop would), as one grid in one process
    (one run after another: the reference) and as one grid on worker processes (`grid_workers=0`). Each way writes
    into its own folder (repetitions rotate the order); every run's training loss and test score are compared with
    the reference. Then the padding waste of the grid's training batches, without and with length grouping."""
    task, root = SUITES["offline"][dataset], working_root()
    data_dir = Path(data_dir or tasks_dir(root)).absolute()
    build_offline([dataset], data_dir, progress=False)
    grid_lrs, grid_seeds = list(FINETUNE_LRS[:lrs]), list(range(seeds))
    grid = _BenchGrid(scale_config("mini"), root, [f"data_dir={data_dir}", f"datasets=[{dataset}]",
                                                   f"groups=[{task.group}]", f"lrs={grid_lrs}", f"seeds={grid_seeds}"])
    cfg = grid.config()
    data = load_task(task, data_dir, cfg.max_train, cfg.max_eval)
    tmp = Path(tempfile.mkdtemp(prefix="mlmclm-bench-finetune-"))
    try:
        field = {"SC": "text", "QA": "context", "IR": "query"}.get(task.group)
        texts = [r[field] if field else " ".join(r["tokens"]) for r in data["train"]]
        # a random init: speed does not depend on the weights, and a fresh clone has no pretrained checkpoint
        grid.model_dir = random_checkpoint(tmp / "ckpt" / "model", texts, vocab_size=4096, size=size)
        separate = [[sys.executable, "-m", "mlmclm", "finetune", str(grid.model_dir), "--scale", "mini",
                     "--data-dir", str(data_dir), "--datasets", dataset, "--groups", task.group, "--lrs", str(lr),
                     "--seeds", str(seed), "--model-id", "bench", "--set", "grid_workers=1"]
                    for lr in grid_lrs for seed in grid_seeds]
        ways = {ONE: grid.in_process(1), f"{lrs * seeds} separate processes": grid.separate(separate, root),
                WORKERS: grid.in_process(0)}
        grid.in_process(None, ["lrs=[1e-3]", "seeds=[0]", "max_steps=2"])(tmp / "warm-up")
        times, results = _time_ways(ways, tmp, reps)
        shape = {"size": f"{size} {dataset} R={lrs * seeds} ({lrs} lrs x {seeds} seeds)", "seq_len": cfg.max_length,
                 "batch": cfg.batch_size, "reps": reps}
        rows = _grid_rows(times, results, shape, lrs * seeds)
        return rows + _padding_rows(task, data, cfg, grid.model_dir, grid_seeds, shape, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


ONE, WORKERS = "one process, one run after another", "one process, grid_workers=0"  # bench_finetune's ways


@dataclass
class _BenchGrid:
    """`bench_finetune`'s grid: the scale's fine-tuning config with `overrides`, run each way into a folder."""
    scale: ScaleConfig
    root: Path  # the working root
    overrides: list[str]
    model_dir: Path | None = None

    def config(self, *more: str) -> FinetuneConfig:
        return finetune_config(self.scale, [*self.overrides, *more])

    def in_process(self, workers: int | None, more=()):
        """Run as one grid in this process on `workers` (None: the scale's `grid_workers`)."""
        def go(out):
            own = [f"grid_workers={workers}"] if workers is not None else []
            run_grid(self.model_dir, self.config(*more, f"results_dir={out}", *own), model_id="bench", progress=False,
                     root=self.root)
        return go

    def separate(self, commands: list[list[str]], root: Path):
        """Run as separate `mlmclm finetune` processes, in the working root `root`."""
        def go(out):
            for command in commands:
                subprocess.run([*command, "--runs-dir", str(out)], check=True, capture_output=True, cwd=root)
        return go


def _time_ways(ways: dict, tmp: Path, reps: int) -> tuple[dict, dict]:
    """Each way's wall times over `reps` repetitions (their order rotating, so that no way always goes first) and
    its results.json of the last one, by run folder."""
    times, results = {v: [] for v in ways}, {}
    for rep in range(reps):
        names = list(ways)
        for v in names[rep % 3:] + names[:rep % 3]:
            out = tmp / f"rep{rep}-{names.index(v)}"
            t = time.perf_counter()
            ways[v](out)
            times[v].append(time.perf_counter() - t)
            results[v] = {f.parent.name: json.loads(f.read_text()) for f in out.rglob(RESULTS)}
    return times, results


def _grid_rows(times: dict, results: dict, shape: dict, runs: int) -> list[dict]:
    """The ways' median times and speed-ups, and how far each way's runs are from the reference's (`ONE`)."""
    med = {v: statistics.median(ts) for v, ts in times.items()}
    separate_runs = next(v for v in times if v not in (ONE, WORKERS))
    rows = [{"bench": "finetune_grid_s", **shape, "variant": v, "median_s": f"{med[v]:.2f}"} for v in times]
    rows += [{"bench": "finetune_grid_speedup", **shape, "variant": f"{fast} vs {slow}",
              "ratio": f"{med[slow] / med[fast]:.3f}"}
             for fast, slow in ((WORKERS, ONE), (WORKERS, separate_runs), (ONE, separate_runs))]
    for v in (separate_runs, WORKERS):  # the same runs, the same results as the reference
        if sorted(results[v]) != sorted(results[ONE]) or len(results[ONE]) != runs:
            raise RuntimeError(f"{v} wrote other runs than {ONE}")
        for what, get in (("train loss", lambda d: d["meta"]["train_loss"]),
                          ("test score", lambda d: d["test"]["score"])):
            diff = max(abs(get(results[v][n]) - get(results[ONE][n])) for n in results[ONE])
            rows.append({"bench": "finetune_max_abs_diff", **shape, "variant": f"{v} vs {ONE}: {what}",
                         "ratio": f"{diff:.2e}"})
    n_workers = next(iter(results[WORKERS].values()))["meta"]["grid_workers"]
    return rows + [{"bench": "finetune_workers", **shape, "variant": WORKERS, "ratio": str(n_workers)}]


def _padding_rows(task, data: dict, cfg: FinetuneConfig, model_dir: Path, seeds: list[int], shape: dict,
                  root: Path) -> list[dict]:
    """The padding waste of the grid's training batches, without and with length grouping."""
    ckpt = open_checkpoint(model_dir, root=root)
    features = encode(task, data, ckpt.tokenizer, max_length(cfg, ckpt), cfg.qa_stride)["train"]["features"]
    lengths = [feature_length(f) for f in features]
    rows = []
    for grouping in (False, True):
        real = padded = 0
        for seed in seeds:
            for idx in batch_plan(lengths, cfg.batch_size, np.random.default_rng(seed), grouping)[:cfg.max_steps]:
                real += sum(lengths[i] for i in idx)
                padded += len(idx) * max(lengths[i] for i in idx)
        rows.append({"bench": "finetune_pad_fraction", **shape,
                     "variant": f"length grouping {'on' if grouping else 'off'}", "ratio": f"{1 - real / padded:.3f}"})
    return rows


def write_rows(name: str, rows: list[dict], started: float, root: Path) -> Path:
    """`results/bench/<name>.csv` in the working root `root`: the rows, each with the machine, versions, commit and
    the benchmark's wall time (since `started`, a `time.perf_counter()`)."""
    path = root / "results" / "bench" / f"{name}.csv"
    hw, ver = hardware(), versions()
    context = {"machine": f"{hw['machine']} x{hw['cpu_count']}" + (f" {hw['gpu']}" if "gpu" in hw else ""),
               "torch": ver["torch"], "transformers": ver["transformers"], "commit": git_commit(),
               "bench_wall_s": f"{time.perf_counter() - started:.0f}"}
    fields = ["bench", "size", "variant", "seq_len", "batch", "median_s", "tokens_per_s", "peak_mib", "ratio",
              "reps", *context]
    import io
    buf = io.StringIO()
    w = csv.DictWriter(buf, fields)
    w.writeheader()
    for r in rows:
        w.writerow({**r, **context})
    write_text(path, buf.getvalue())
    return path


def _pretrain_line(r: dict) -> str:
    value = f"{r['tokens_per_s']:>9} tok/s" if r["bench"] == "pretrain_step" else f"{r['ratio']:>9} x"
    return f"{r['size']:<8} {r['variant']:<60} {value}"


def _finetune_line(r: dict) -> str:
    value = f"{r['median_s']} s" if r["bench"] == "finetune_grid_s" else r["ratio"]
    return f"  {r['bench']:<22} {r['variant']:<64} {value:>10}"


# `mlmclm bench NAME`: how to compute its rows from the arguments, and how to print a row
BENCHES = {
    "pretrain": (lambda a: bench_pretrain(a.sizes, a.seq_len, a.batch, a.reps, a.threads), _pretrain_line),
    "memory": (lambda a: bench_memory(a.size, a.vocab, a.seq_len, a.batch),
               lambda r: f"{r['size']:<20} {r['variant']:<36} {r.get('peak_mib') or r['ratio']:>8}"),
    "finetune": (lambda a: bench_finetune(a.dataset, a.lrs, a.seeds, a.size, a.data_dir, a.reps), _finetune_line),
    "mfu": (lambda a: bench_mfu(a.size, a.seq_len, a.batch, a.backends.split(","), a.objectives.split(","), a.steps,
                                device=a.device, peak=a.peak_tflops, compile_model=a.compile),
            lambda r: f"{r['size']:<6} {r['variant']:<40} {r.get('tokens_per_s', ''):>9} tok/s  "
                      f"MFU {r.get('ratio', '')}"),
    "notebooks": (lambda a: bench_notebooks(a.reps), lambda r: f"{r['variant']}: {r['median_s']} s"),
}


def bench_command(args) -> int:
    started, root = time.perf_counter(), working_root()
    compute, line = BENCHES[args.bench]
    rows = compute(args)
    path = write_rows(args.bench, rows, started, root)
    if args.bench == "finetune":
        print(rows[0]["size"], f"mini protocol, median of {args.reps}")
    for r in rows:
        print(line(r))
    print(f"written: {path.relative_to(root)}")
    return 0
