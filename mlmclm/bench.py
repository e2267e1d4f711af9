"""Benchmarks, measured side by side in one process: same shapes, same batch, interleaved repetitions after warm-up,
medians and ratios. Results go to `results/bench/<name>.csv` with hardware and versions.

    mlmclm bench pretrain [--sizes tiny mini-m] [--seq-len 128] [--batch 16] [--reps 7]
    mlmclm bench memory [--size mini-m] [--vocab 128256]
    mlmclm bench notebooks

Pretraining step throughput (forward, backward, AdamW step) of:
- mlmclm MLM (40% masking) with the sparse head vs the same model with a dense head, and vs transformers'
  `EuroBertForMaskedLM` of the same shape (dense logits);
- mlmclm CLM vs transformers' `LlamaForCausalLM` of the same shape;
- mlmclm MLM and CLM with each attention backend this CPU runs (sdpa, eager, kernels).
Peak memory of one CLM training step (forward + backward) at the paper's 128k vocabulary, each variant in a fresh
process (the growth of the process's peak resident memory over what it held before the step).
"""

from __future__ import annotations

import csv
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from .configuration import MlmClmConfig
from .io import ROOT, hardware, versions, write_text
from .modeling import MlmClmForMaskedLM
from .objectives import IGNORE


def _hf_twin(config: MlmClmConfig, kind: str):
    from transformers import EuroBertConfig, EuroBertForMaskedLM, LlamaConfig, LlamaForCausalLM

    shape = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                 intermediate_size=config.intermediate_size, num_hidden_layers=config.num_hidden_layers,
                 num_attention_heads=config.num_attention_heads, num_key_value_heads=config.num_key_value_heads,
                 max_position_embeddings=config.max_position_embeddings, attn_implementation="sdpa",
                 tie_word_embeddings=False)
    if kind == "llama":
        return LlamaForCausalLM(LlamaConfig(**shape))
    return EuroBertForMaskedLM(EuroBertConfig(**shape, mask_token_id=3, pad_token_id=0, bos_token_id=1,
                                              eos_token_id=2))


def _steps(size: str, seq_len: int, batch: int, seed: int = 0):
    """name -> a function doing one training step; all share one batch and one masking."""
    torch.manual_seed(seed)
    config = MlmClmConfig.from_size(size, max_position_embeddings=max(seq_len, 128))
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, config.vocab_size, (batch, seq_len), generator=g)
    selected = torch.rand(ids.shape, generator=g) < 0.4
    mlm_labels = torch.where(selected, ids, IGNORE)
    mlm_inputs = ids.masked_fill(selected, 3)
    clm_labels = torch.full_like(ids, IGNORE)
    clm_labels[:, :-1] = ids[:, 1:]

    def trainer(model, loss_fn):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-5, weight_decay=0.1)

        def step():
            loss = loss_fn(model)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss
        return step

    def dense_mlm(model):
        logits = model(mlm_inputs).logits
        return F.cross_entropy(logits.flatten(0, 1).float(), mlm_labels.flatten(), ignore_index=IGNORE)

    def ours(backend="sdpa"):
        model = MlmClmForMaskedLM(config)
        model.set_attention_backend(backend)
        return model

    steps = {
        "mlmclm MLM40 sparse head": trainer(ours(), lambda m: m(mlm_inputs, labels=mlm_labels, is_causal=False).loss),
        "mlmclm MLM40 dense head": trainer(ours(), dense_mlm),
        "transformers EuroBertForMaskedLM MLM40": trainer(_hf_twin(config, "eurobert"), lambda m: m(
            mlm_inputs, labels=mlm_labels).loss),
        "mlmclm CLM": trainer(ours(), lambda m: m(ids, labels=clm_labels, is_causal=True).loss),
        "transformers LlamaForCausalLM CLM": trainer(_hf_twin(config, "llama"), lambda m: m(ids, labels=ids).loss),
    }
    for backend in BACKENDS_ON_CPU[1:]:  # the other attention backends this machine runs (sdpa is above)
        steps[f"mlmclm MLM40 sparse head [{backend}]"] = trainer(ours(backend), lambda m: m(
            mlm_inputs, labels=mlm_labels, is_causal=False).loss)
        steps[f"mlmclm CLM [{backend}]"] = trainer(ours(backend), lambda m: m(ids, labels=clm_labels,
                                                                                  is_causal=True).loss)
    return config, steps


BACKENDS_ON_CPU = ("sdpa", "eager", "kernels")  # flex has no backward pass on CPU
RATIOS = [("MLM40 sparse / dense head", "mlmclm MLM40 sparse head", "mlmclm MLM40 dense head"),
          ("MLM40 mlmclm / EuroBertForMaskedLM", "mlmclm MLM40 sparse head", "transformers EuroBertForMaskedLM MLM40"),
          ("CLM mlmclm / LlamaForCausalLM", "mlmclm CLM", "transformers LlamaForCausalLM CLM")]


def bench_pretrain(sizes=("tiny", "mini-m"), seq_len: int = 128, batch: int = 16, reps: int = 7, warmup: int = 2):
    rows = []
    for size in sizes:
        config, steps = _steps(size, seq_len, batch)
        for step in steps.values():
            for _ in range(warmup):
                step()
        times = {name: [] for name in steps}
        for _ in range(reps):  # interleaved: machine noise hits every variant alike
            for name, step in steps.items():
                t = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - t)
        tokens = batch * seq_len
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        for name, med in medians.items():
            rows.append({"bench": "pretrain_step", "size": size, "variant": name, "seq_len": seq_len, "batch": batch,
                         "median_s": f"{med:.5f}", "tokens_per_s": f"{tokens / med:.0f}", "reps": reps})
        ratios = list(RATIOS) + [(f"{obj} {backend} / sdpa", f"{name} [{backend}]", name)
                                 for backend in BACKENDS_ON_CPU[1:]
                                 for obj, name in (("MLM40", "mlmclm MLM40 sparse head"), ("CLM", "mlmclm CLM"))]
        for label, num, den in ratios:
            rows.append({"bench": "pretrain_ratio", "size": size, "variant": label, "seq_len": seq_len,
                         "batch": batch, "ratio": f"{medians[den] / medians[num]:.3f}", "reps": reps})
    return rows


MEMORY_VARIANTS = ("mlmclm CLM", "transformers LlamaForCausalLM CLM")


def _memory_probe(variant: str, size: str, vocab: int, seq_len: int, batch: int) -> None:
    """Run in a fresh process: print the growth of peak RSS (MiB) over one CLM training step."""
    torch.manual_seed(0)
    config = MlmClmConfig.from_size(size, vocab_size=vocab, max_position_embeddings=max(seq_len, 128))
    ids = torch.randint(4, vocab, (batch, seq_len))
    if variant == "mlmclm CLM":
        model = MlmClmForMaskedLM(config)
        labels = torch.full_like(ids, IGNORE)
        labels[:, :-1] = ids[:, 1:]
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


def bench_notebooks(reps: int = 1) -> list[dict]:
    """Wall time of `mlmclm figures` (all five notebooks: every figure and table), in a fresh process."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mlmclm.notebooks"], cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return [{"bench": "notebooks_wall_s", "size": "", "variant": "mlmclm figures (5 notebooks)",
             "median_s": f"{statistics.median(times):.1f}", "reps": reps}]


def write_rows(name: str, rows: list[dict]) -> Path:
    path = ROOT / "results" / "bench" / f"{name}.csv"
    hw, ver = hardware(), versions()
    context = {"machine": f"{hw['machine']} x{hw['cpu_count']}" + (f" {hw['gpu']}" if "gpu" in hw else ""),
               "torch": ver["torch"], "transformers": ver["transformers"]}
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


def _cli(args) -> int:
    torch.set_num_threads(args.threads or torch.get_num_threads())
    rows = bench_pretrain(args.sizes, args.seq_len, args.batch, args.reps)
    path = write_rows("pretrain", rows)
    for r in rows:
        if r["bench"] == "pretrain_step":
            print(f"{r['size']:<8} {r['variant']:<42} {r['tokens_per_s']:>9} tok/s")
        else:
            print(f"{r['size']:<8} {r['variant']:<42} {r['ratio']:>9} x")
    print(f"written: {path.relative_to(ROOT)}")
    return 0


def _memory_cli(args) -> int:
    rows = bench_memory(args.size, args.vocab, args.seq_len, args.batch)
    path = write_rows("memory", rows)
    for r in rows:
        print(f"{r['size']:<20} {r['variant']:<36} {r.get('peak_mib') or r['ratio']:>8}")
    print(f"written: {path.relative_to(ROOT)}")
    return 0


def _notebooks_cli(args) -> int:
    rows = bench_notebooks(args.reps)
    path = write_rows("notebooks", rows)
    print(f"{rows[0]['variant']}: {rows[0]['median_s']} s (median of {args.reps})\nwritten: {path.relative_to(ROOT)}")
    return 0


def add_cli(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks (side by side, medians and ratios)")
    b = p.add_subparsers(dest="bench", required=True)
    pre = b.add_parser("pretrain", help="pretraining step throughput vs transformers' own models")
    pre.add_argument("--sizes", nargs="+", default=["tiny", "mini-m"])
    pre.add_argument("--seq-len", type=int, default=128)
    pre.add_argument("--batch", type=int, default=16)
    pre.add_argument("--reps", type=int, default=7)
    pre.add_argument("--threads", type=int, default=None)
    pre.set_defaults(run=_cli)
    mem = b.add_parser("memory", help="peak memory of a CLM training step at a large vocabulary")
    mem.add_argument("--size", default="mini-m")
    mem.add_argument("--vocab", type=int, default=128_256)
    mem.add_argument("--seq-len", type=int, default=128)
    mem.add_argument("--batch", type=int, default=16)
    mem.set_defaults(run=_memory_cli)
    nb = b.add_parser("notebooks", help="time to regenerate every figure and table (the five notebooks)")
    nb.add_argument("--reps", type=int, default=1)
    nb.set_defaults(run=_notebooks_cli)
