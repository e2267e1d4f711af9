"""`mlmclm <verb>`: the command line.

    mlmclm model info SIZE       architecture, parameter counts and FLOPs a token (no weights are allocated)
    mlmclm attention check       every attention backend on this machine against the eager reference
    mlmclm notebooks             execute the five notebooks: every figure and table from results/
    mlmclm reproduce             the main job (see `reproduce --help`)

Every verb is listed once, in the command table (`_verbs`): its name, its one-line help and the function that adds its
options and its job (`set_defaults(run=function_of_args)`), defined by the module that owns the job. The modules the
table imports are torch-free; a verb whose job imports torch has its options in `mlmclm.commands`, whose job functions
import their module only when the verb runs: no `--help` imports torch.
"""

from __future__ import annotations

import sys  # first, and little before `main`: Ctrl-C in any later moment is caught there
import signal
from pathlib import Path

EARLY: list[int] = []  # a Ctrl-C or SIGTERM while the program imports this module: noted here, said by `main`


def _early(signum, frame):
    EARLY.append(signum)


if Path(sys.argv[0]).name == "mlmclm" or Path(sys.argv[0]).parent.name == "mlmclm":  # the program (not a test)
    for _sig, _default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(_sig) is _default:
            signal.signal(_sig, _early)

import argparse  # noqa: E402 (after the handler above: these imports take a second on a loaded machine)

from . import commands
from .errors import MlmClmError

USAGE = """\
MLM and CLM encoders as in "Should We Still Pretrain Encoders with Masked Language Modeling?" (arXiv 2507.00994):
pretrain, fine-tune, compare with the paper. `mlmclm VERB --help` says more of each verb.

  mlmclm reproduce --scale mini           the studies a scale can test, then every figure and table
  mlmclm study plan all --scale long       what a study would train and fine-tune, and how long it takes
  mlmclm study run biphasic --scale long   train and fine-tune what is missing of a study
  mlmclm pretrain tiny                     one pretraining run (a recipe or a YAML config, key=value overrides)
  mlmclm finetune CHECKPOINT --scale tiny  the fine-tuning grid on one checkpoint (any transformers model)
  mlmclm export CHECKPOINT OUT             a checkpoint as transformers' own EuroBert or Llama model
  mlmclm notebooks                         re-execute the five notebooks from the stored results"""

def _millions(n: int) -> str:
    return f"{n:,} ({n / 1e6:,.1f}M)"


def model_info(size: str, seq_len: int | None = None) -> str:
    from .models.configuration import MlmClmConfig

    c = MlmClmConfig.from_size(size)
    p = c.num_parameters_by_part()
    t = seq_len or c.max_position_embeddings
    rows = [
        ("size", size),
        ("layers", c.num_hidden_layers),
        ("hidden", c.hidden_size),
        ("FFN (SwiGLU)", c.intermediate_size),
        ("attention heads / KV heads", f"{c.num_attention_heads} / {c.num_key_value_heads}"),
        ("head dim", c.head_dim),
        ("vocabulary", f"{c.vocab_size:,}"),
        ("context", f"{c.max_position_embeddings:,}"),
        ("RMSNorm eps / RoPE theta", f"{c.rms_norm_eps:g} / {c.rope_theta:,.0f}"),
        ("output layer", "tied" if c.tie_word_embeddings else "untied"),
        ("params: embeddings", _millions(p["embeddings"])),
        ("params: body", _millions(p["body"])),
        ("params: embeddings + body", _millions(p["embeddings"] + p["body"])),
        ("params: output layer", _millions(p["output_layer"])),
        ("params: total", _millions(p["total"])),
        (f"FLOPs/token forward (seq {t:,})", f"{c.flops_per_token(t, training=False) / 1e9:,.2f} GFLOP"),
        (f"FLOPs/token training (seq {t:,})", f"{c.flops_per_token(t, training=True) / 1e9:,.2f} GFLOP"),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def attention_check(device: str = "cpu") -> list[tuple[str, str, float, float]]:
    """Max |difference| to `eager` of every backend runnable on `device`, forward and gradients, on a batch with
    padding, document boundaries and GQA, causal and bidirectional. Returns (backend, mode, fwd, grad) rows."""
    import torch

    from .models.attention import attention
    from .models.configuration import ATTENTION_BACKENDS

    g = torch.Generator().manual_seed(0)
    b, h, hkv, t, d = 2, 4, 2, 24, 16
    q0, k0, v0 = (torch.randn(b, n, t, d, generator=g).to(device) for n in (h, hkv, hkv))
    mask = torch.ones(b, t, dtype=torch.long, device=device)
    mask[1, 17:] = 0
    docs = torch.tensor([[0] * 9 + [1] * 15, [0] * 5 + [1] * 7 + [2] * 12], device=device)

    def run(backend, causal):
        q, k, v = (x.clone().requires_grad_() for x in (q0, k0, v0))
        out = attention(q, k, v, is_causal=causal, attention_mask=mask, document_ids=docs, backend=backend)
        (out * mask[:, None, :, None]).square().sum().backward()
        return (out * mask[:, None, :, None]).detach(), [x.grad for x in (q, k, v)]

    backends = [x for x in ATTENTION_BACKENDS if x != "eager" and not (x == "flex" and device == "cpu")]
    rows = []
    for causal in (False, True):
        ref, ref_grads = run("eager", causal)
        for backend in backends:
            out, grads = run(backend, causal)
            rows.append((backend, "causal" if causal else "bidirectional", float((out - ref).abs().max()),
                         max(float((a - r).abs().max()) for a, r in zip(grads, ref_grads))))
    return rows


def _print_attention_check(device: str = "cpu") -> None:
    print(f"attention backends vs eager on {device} (max |diff|, padding + documents + GQA):")
    for backend, mode, fwd, grad in attention_check(device):
        print(f"  {backend:<8} {mode:<13} forward {fwd:.1e}  gradients {grad:.1e}")
    print()


def main(argv: list[str] | None = None) -> int:
    """Run `mlmclm ARGV`; every fault a user can meet ends in one line on stderr: their errors (`MlmClmError`) and
    a full disk with status 2, a killed worker process with 1, Ctrl-C (at any moment, imports included) with 130 and
    SIGTERM with 143. Anything else is a bug and keeps its traceback. The signals are the command's only where it is
    the program (`argv` None: the command line); a caller that passes `argv` (a test, a script) keeps its own, so that
    Ctrl-C raises `KeyboardInterrupt` out of this call and SIGTERM does what it does there (pytest stops)."""
    program, interrupted, done, stopping = argv is None, [], False, []
    on_signal = _on_signal(interrupted, stopping)
    ours = program and signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _early)  # an ignored one stays
    previous = signal.signal(signal.SIGINT, on_signal) if ours else None
    term = program and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _early)  # SIGTERM (kill, a scheduler)
    previous_term = signal.signal(signal.SIGTERM, on_signal) if term else None
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _signal_again(interrupted, previous_hook) if ours or term else previous_hook
    try:
        if EARLY and program:  # signalled while this module imported
            interrupted.extend(EARLY)
            raise KeyboardInterrupt
        status, done = _main(argv), True
        return status
    except MlmClmError as e:  # a user's error: one clear line; anything else is a bug and keeps its traceback
        print(f"mlmclm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: what was written is kept, a re-run goes on from there
        stopping.append(True)
        if not program:
            raise
        return _interrupted(e.args[0] if e.args else "interrupted", interrupted)
    except Exception as e:
        from concurrent.futures.process import BrokenProcessPool

        from .io import disk_full

        if interrupted:  # e.g. an import that Ctrl-C cut short, reported by its library as another error
            return _interrupted("interrupted", interrupted)
        if disk_full(e):
            where = f" writing {e.filename}" if getattr(e, "filename", None) else ""
            print(f"mlmclm: error: no space left on the device{where}; free some and re-run the same command (what "
                  f"was written whole is kept, what was half-written is removed)", file=sys.stderr)
            return 2
        if isinstance(e, BrokenProcessPool):
            print("mlmclm: error: a worker process ended abruptly (killed, or out of memory); re-run the same "
                  "command: what finished is kept", file=sys.stderr)
            return 1
        raise
    finally:
        if program and done:
            _end_process_group()
        if ours:
            signal.signal(signal.SIGINT, previous)
        if term:
            signal.signal(signal.SIGTERM, previous_term)
        sys.unraisablehook = previous_hook


def _on_signal(interrupted: list[int], stopping: list):
    """`main`'s handler of SIGINT and SIGTERM: each noted in `interrupted` (a library may swallow the
    KeyboardInterrupt and fail otherwise) and raised as KeyboardInterrupt, unless `main` is already `stopping` (a
    second signal while the first one's line is said, a launcher's, is noted, not raised); a forked worker ends as by
    default on SIGTERM, and its parent reports. A first signal while torch is still importing is sent again once the
    import has ended (`_signal_later`): a KeyboardInterrupt inside torch's initialization can abort the process
    (SIGABRT, with a dump of Python frames: CI, Ctrl-C 1 s into `pretrain`); a second one is raised at once."""
    import os

    me = os.getpid()

    def on_signal(signum, frame):
        if os.getpid() != me and signum == signal.SIGTERM:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        interrupted.append(signum)
        if len(interrupted) == 1 and _importing_torch():
            _signal_later(signum, busy=_importing_torch)
        elif not stopping:
            raise KeyboardInterrupt
    return on_signal


def _importing_torch() -> bool:
    """Whether torch or one of its modules is still executing its import (its spec marked `_initializing`)."""
    return any(name.partition(".")[0] == "torch" and getattr(getattr(m, "__spec__", None), "_initializing", False)
               for name, m in list(sys.modules.items()))


def _signal_later(signum: int, busy=lambda: False) -> None:
    """Send `signum` to this process again from another thread, once `busy()` is false (it reaches the main thread,
    where Python runs signal handlers, at its next bytecode)."""
    import os
    import threading
    import time

    def again():
        time.sleep(0.01)
        while busy():
            time.sleep(0.02)
        os.kill(os.getpid(), signum)
    threading.Thread(target=again, daemon=True).start()


def _signal_again(interrupted: list[int], previous):
    """An unraisable hook: a KeyboardInterrupt of `main`'s that landed in a finalizer (`__del__`), which swallows it,
    is signalled again from another thread, so that it reaches the main thread once the finalizer is left."""
    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and interrupted:
            _signal_later(interrupted[-1])
        else:
            previous(unraisable)
    return hook


def _end_process_group() -> None:
    """Destroy the process group of a multi-process launch (`accelerate launch`) before the interpreter ends, once the
    command has done its work (a failed one may leave other processes inside a collective). Left to the interpreter's
    end, gloo's worker threads may still hold finished collectives whose tensors they release while Python shuts down,
    which aborts the process (SIGABRT; pytorch PR 179291, issue 190489): the likely cause of the rank-1 abort of a
    launch whose every step succeeded (issue 48)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _interrupted(what: str, signals: list[int]) -> int:
    """Say what stopped and how to go on; the status of the signal (130 Ctrl-C, 143 SIGTERM)."""
    import signal

    if "tqdm" in sys.modules:
        from tqdm import tqdm

        for bar in list(getattr(tqdm, "_instances", ())):  # drawn now, not after the line below
            bar.close()
    by = signal.SIGTERM if signal.SIGTERM in signals else signal.SIGINT
    if by == signal.SIGTERM:
        what = what.replace("interrupted", "terminated (SIGTERM)")
    print(f"\nmlmclm: {what}; re-run the same command to resume", file=sys.stderr)
    return 128 + by


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every verb of the command table, each verb's --help ending in how its paths are read
    where it takes one."""
    parser = commands.Parser(prog="mlmclm", description=USAGE, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="verb", required=True)
    for verb, help_, add_options in _verbs():  # notebooks: its --help and the rest of its line are its own
        add_options(sub.add_parser(verb, help=help_, add_help=verb != "notebooks"))
    commands.finish_parsers(parser)
    return parser


def _verbs() -> tuple:
    """The command table: (verb, its help in `mlmclm --help`, the function that adds its options and job) of every
    verb, in the order `mlmclm --help` lists them."""
    from . import export, studies, workspace
    from .analysis.judging import coverage
    from .evaluation import offline_suite

    return (
        ("model", "model introspection", _model_options),
        ("attention", "attention backends", _attention_options),
        ("notebooks", "execute the five notebooks (figures/ and results/tables/)", _notebooks_options),
        ("reproduce", "the main job: the five studies at a scale, then every figure and table", _reproduce_options),
        ("pretrain", "pretrain one model (MLM, CLM or a phase schedule)", commands.pretrain_options),
        ("data", "prepare and verify a run's pretraining data (corpus, tokenizer, shards) once; cached. A "
                 "multi-process launch builds none: run this first (CONFIG: a scale's recipe, e.g. paper)",
         commands.data_options),
        ("finetune", "the paper's fine-tuning grid on one checkpoint", commands.finetune_options),
        ("bench", "benchmarks (side by side, medians and ratios)", commands.bench_options),
        ("tasks", "downstream task suites", offline_suite.add_options),
        ("study", "the paper's five studies at a scale: print the plan, or run what is missing", studies.add_options),
        ("init", "write the five notebooks and the paper's tables into a working folder", workspace.add_options),
        ("export", "a checkpoint in transformers' own EuroBert or Llama format, with a model card",
         export.add_options),
        ("coverage", "how often the verdicts' 95%% intervals cover a known difference, simulated from a scale's own "
                     "variance components", coverage.add_options),
    )


def _model_options(p) -> None:
    info = p.add_subparsers(dest="action", required=True).add_parser(
        "info", help="architecture, parameter counts, FLOPs a token")
    info.add_argument("size", help="210m, 610m, 1b or a scale size (tiny, mini-s, ...)")
    info.add_argument("--seq-len", type=_positive_int, default=None,
                      help="context for the attention FLOPs (default: max)")
    info.set_defaults(run=lambda args: print(model_info(args.size, args.seq_len)))


def _attention_options(p) -> None:
    chk = p.add_subparsers(dest="action", required=True).add_parser(
        "check", help="every backend against the eager reference")
    chk.add_argument("--device", default="cpu", help="a torch device (default: cpu)")
    chk.set_defaults(run=lambda args: _print_attention_check(args.device))


def _notebooks_options(p) -> None:
    p.set_defaults(run=_notebooks)


def _notebooks(argv: list[str], root) -> int:
    """`mlmclm notebooks`: the rest of the line is the notebooks' own command line (`root`: the working root)."""
    from .analysis.drawing import notebooks

    return notebooks.main(argv, root)


def _reproduce_options(p) -> None:
    from .config import scale_names

    p.add_argument("--scale", default="mini", help=f"{', '.join(scale_names())} (default: mini)")
    commands.results_dir(p)
    p.add_argument("--checkpoints-dir", default=None, help="default checkpoints")
    p.add_argument("--data-dir", default=None, help="corpora, tokenizers, shards and the task suite (tasks/) "
                                                   "(default: data)")
    p.add_argument("--output-dir", default=None,
                   help="write executed notebooks, figures and tables here instead of in place")
    p.set_defaults(run=_reproduce)


def _reproduce(args) -> int:
    from . import studies

    studies.reproduce(args.scale, args.root, results_dir=args.results_dir, output_dir=args.output_dir,
                      checkpoints_dir=args.checkpoints_dir, data_dir=args.data_dir)
    return 0


def _main(argv: list[str] | None) -> int:
    from .io import check_encodable, git_commit, working_root

    for arg in sys.argv[1:] if argv is None else argv:  # a path the run records and lock files could not write
        check_encodable(arg)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and isinstance(getattr(args, "overrides", None), list) and args.verb in ("pretrain", "data") and all(
            "=" in r and not r.startswith("-") for r in rest):  # key=value overrides after an option
        args.overrides, rest = [*args.overrides, *rest], []
    if argv is None:  # the commit of the code this process loaded, which its records name however long it runs
        git_commit()
    args.root = working_root()  # read once here and passed down: every job finds it as `args.root`
    if args.verb == "notebooks":
        return args.run(rest, args.root)
    if rest:  # the verb's own usage, and what it takes instead
        verb = commands.verb_parser(parser, sys.argv[1:] if argv is None else argv)
        verb.error(f"unrecognized arguments: {' '.join(rest)} ({commands.unknown_hint(parser, verb, rest)})")
    return args.run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
