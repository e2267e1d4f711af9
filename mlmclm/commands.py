"""The command-line options of the verbs whose modules import torch (`pretrain`, `data`, `finetune`, `bench`), kept
apart from them so that `mlmclm --help`, every verb's `--help` and the torch-free verbs never import torch: each
verb's job (`set_defaults(run=...)`) is a function here that imports its module only when the verb runs. The options these verbs share are defined once here (`report_to`, `scale`, the folders: `--runs-dir`
of the verbs that write run folders, `--results-dir` of `reproduce`), and the scale and recipe lists come from the
shipped files.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from argparse import ArgumentTypeError
from pathlib import Path

from .config import RECIPES_DIR, scale_names
from .training.trackers import REPORT_TO


PATHS = ("paths: a file or folder named on the command line (an argument, or an option such as --runs-dir, "
         "--checkpoints-dir, --data-dir, --results-dir, --output-dir) is read from the folder you are in, as any "
         "command reads it; an unset folder is its default in the working root ($MLMCLM_ROOT, else the nearest "
         "folder at or above this one holding results/paper/, else this one); a key=value or --set field is a "
         "config's, read from the working root as in a config file. Paths printed are relative to the folder you "
         "are in when inside it, else absolute.")
PATH_DESTS = {"runs_dir", "checkpoints_dir", "data_dir", "results_dir", "output_dir", "out", "folder", "checkpoint",
              "model_dir", "config"}  # the options and arguments that name a file or folder


def every_parser(parser):
    """`parser` and every verb's parser under it, depth first."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from every_parser(sub)


def finish_parsers(parser) -> None:
    """End the --help of every verb under `parser` that takes a path (`PATH_DESTS`) with how paths are read
    (`PATHS`), and take no option by a prefix of its name (`--model` is not `--model-id`): called once on the whole
    command line, so that no verb is left out."""
    for p in every_parser(parser):
        p.allow_abbrev = False
        if any(action.dest in PATH_DESTS for action in p._actions):
            p.epilog = PATHS


class Parser(argparse.ArgumentParser):
    """The command line's parser (every verb's too): a required option left out names a close option typed in its
    place (`--scal tiny`: did you mean --scale?), as an option a verb does not take does (`unknown_hint`)."""

    def parse_known_args(self, args=None, namespace=None):
        """Parse as argparse does, keeping the words this parser reads (a verb's parser is handed its own) for
        `error`."""
        self.words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message):
        if message.startswith("the following arguments are required"):
            own = [o for a in self._actions for o in a.option_strings]
            typed = [w.split("=")[0] for w in getattr(self, "words", []) if w.startswith("--")
                     and w.split("=")[0] not in own]
            near = [(w, c[0]) for w in typed if (c := difflib.get_close_matches(w, own, n=1, cutoff=0.7))]
            message += "".join(f" ({w}: did you mean {c}?)" for w, c in near)
        super().error(message)


def verb_parser(parser, argv: list[str]):
    """The parser of the verb `argv` names (`mlmclm study run ...`: study run's), else `parser` itself."""
    for word in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            break
        parser = subs[0].choices[word]
    return parser


def unknown_hint(parser, verb, rest: list[str]) -> str:
    """What to do about arguments `verb` (a parser under `parser`) does not take: an option of its close to one of
    them, or the verbs that take it."""
    own = [o for a in verb._actions for o in a.option_strings if a.help != argparse.SUPPRESS]
    hints = []
    for word in (w.split("=")[0] for w in rest if w.startswith("--")):
        close = difflib.get_close_matches(word, own, n=1, cutoff=0.7)
        others = sorted({p.prog for p in every_parser(parser) if p is not verb and not p._subparsers
                         and word in p._option_string_actions})
        if close:
            hints.append(f"did you mean {close[0]}?")
        if others:
            hints.append(f"{word} is an option of {', '.join(others)}")
    return "; ".join(hints + [f"see {verb.prog} --help"])


def recipe_names() -> list[str]:
    """The shipped recipes (mlmclm/recipes/<name>.yaml), the names `pretrain` and `data` take."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def report_to(parser, what: str) -> None:
    parser.add_argument("--report-to", choices=REPORT_TO, default="none",
                        help=f"also log {what} to this tracker through accelerate (default: none; tensorboard "
                             "writes logs/ in the run's folder)")


def runs_folder(text: str) -> str:
    """A runs folder (`results/runs`: <scale>/<run or model id>/ inside); a results folder (paper/ and runs/ inside)
    is refused (one line, by argparse) naming its runs folder."""
    if (Path(text) / "runs").is_dir() and (Path(text) / "paper").exists():
        raise ArgumentTypeError(f"{text} is a results folder (it holds paper/ and runs/); this verb takes a "
                          f"runs folder: --runs-dir {Path(text) / 'runs'}")
    return text


def results_folder(text: str) -> str:
    """A results folder (`results`: paper/, runs/<scale>/, tables/ inside); a runs folder (a scale's folder inside,
    no runs/) is refused (one line, by argparse) naming the folder above it."""
    scales = [s for s in scale_names() if (Path(text) / s).is_dir()]
    if scales and not (Path(text) / "runs").exists():
        raise ArgumentTypeError(f"{text} is a runs folder (it holds {scales[0]}/); reproduce takes the results "
                          f"folder above it: --results-dir {Path(text).resolve().parent}")
    return text


def _not_here(text: str) -> str:
    raise ArgumentTypeError("this verb takes --runs-dir RUNS (the runs folder, e.g. results/runs); --results-dir is "
                            "reproduce's results folder (paper/, runs/, tables/ inside)")


def runs_dir(parser, what: str) -> None:
    """`--runs-dir` of the verbs that write run folders (study, finetune): a runs folder. `--results-dir` is
    `reproduce`'s results folder only (one meaning per option name); given here, it is refused naming `--runs-dir`."""
    parser.add_argument("--runs-dir", default=None, type=runs_folder, metavar="RUNS",
                        help=f"the runs folder: {what} go in RUNS/<scale>/ (default: results/runs)")
    parser.add_argument("--results-dir", type=_not_here, help=argparse.SUPPRESS)


def results_dir(parser) -> None:
    """`--results-dir` of `reproduce`: a results folder."""
    parser.add_argument("--results-dir", default=None, type=results_folder, metavar="RESULTS",
                        help="the results folder: paper/, runs/<scale>/ and tables/ (default: results; `study` and "
                             "`finetune` take its runs folder as --runs-dir)")


def _run_config(parser) -> None:
    parser.add_argument("config", help=f"a YAML run config, or a recipe's name ({', '.join(recipe_names())}: "
                                       "mlmclm/recipes/)")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. optim.lr=3e-4")


def pretrain_options(p) -> None:
    _run_config(p)
    p.add_argument("--dry-run", action="store_true", help="print the resolved config and stop")
    report_to(p, "loss, lr, objective and tokens/s at every logged step")
    p.set_defaults(run=_pretrain)


def data_options(d) -> None:
    _run_config(d)
    d.set_defaults(run=_data)


def finetune_options(f) -> None:
    f.add_argument("model_dir", help="a checkpoint folder (any transformers model with a fast tokenizer: mlmclm, "
                                     "a Llama-family decoder, EuroBert or another encoder), a GGUF file of a "
                                     "Llama-family decoder, or a hub id")
    f.add_argument("--scale", required=True, help=f"{', '.join(scale_names())}: sizes, grid and suite")
    f.add_argument("--suite", default=None, help="paper or offline (default: the scale's)")
    f.add_argument("--groups", default=None, help="comma-separated, from SC,TC,QA,IR (default: all)")
    f.add_argument("--datasets", default=None, help="comma-separated dataset names (default: all of the groups)")
    f.add_argument("--lrs", default=None, help="comma-separated learning rates (default: the scale's)")
    f.add_argument("--seeds", default=None, help="comma-separated seeds (default: the scale's)")
    f.add_argument("--model-id", default=None, help="results folder name (default: the checkpoint folder's, or "
                                                    "the hub id's name)")
    runs_dir(f, "its results, <model-id>/,")
    f.add_argument("--data-dir", default=None, help="offline: the built suite; paper: a local hub mirror")
    f.add_argument("--trust-remote-code", action="store_true",
                   help="run the checkpoint's own code where its config.json names some (auto_map), as the paper's "
                        "released MLMvsCLM/* models do; off by default, recorded in meta.trust_remote_code")
    f.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="any fine-tuning config field, e.g. --set batch_size=16 (repeatable)")
    report_to(f, "each run (config, validation curve, scores, train loss)")
    f.set_defaults(run=_finetune)


def bench_options(p) -> None:  # long: the argparse table of the five benchmarks and the GPU check, one option a line
    b = p.add_subparsers(dest="bench", required=True)
    pre = b.add_parser("pretrain", help="pretraining step throughput vs transformers' own models")
    pre.add_argument("--sizes", nargs="+", default=["tiny", "mini-m"], help="model sizes (default: tiny mini-m)")
    pre.add_argument("--seq-len", type=int, default=128, help="tokens a sequence (default: 128)")
    pre.add_argument("--batch", type=int, default=16, help="sequences a step (default: 16)")
    pre.add_argument("--reps", type=int, default=10, help="rounds of 1 untimed + 3 timed steps per variant")
    pre.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    pre.set_defaults(run=_bench)
    mem = b.add_parser("memory", help="peak memory of a CLM training step at a large vocabulary")
    mem.add_argument("--size", default="mini-m", help="model size (default: mini-m)")
    mem.add_argument("--vocab", type=int, default=128_256, help="vocabulary (default: Llama 3's 128,256)")
    mem.add_argument("--seq-len", type=int, default=128, help="tokens a sequence (default: 128)")
    mem.add_argument("--batch", type=int, default=16, help="sequences a step (default: 16)")
    mem.set_defaults(run=_bench)
    ft = b.add_parser("finetune", help="a fine-tuning grid: separate processes vs one process vs worker processes")
    ft.add_argument("--dataset", default="multiemo_sentiment", help="an offline-suite dataset (built if missing)")
    ft.add_argument("--n-lrs", dest="lrs", type=int, default=6,
                    help="how many learning rates the grid has (a count: the first N of 1e-4 ... 2e-3; default: 6)")
    ft.add_argument("--n-seeds", dest="seeds", type=int, default=5, help="how many seeds (a count; default: 5)")
    ft.add_argument("--size", default="mini-m", help="model size of the random checkpoint")
    ft.add_argument("--data-dir", default=None, help="where the offline suite is (default: data/tasks)")
    ft.add_argument("--reps", type=int, default=1, help="repetitions of every way (rotating order)")
    ft.set_defaults(run=_bench)
    mfu = b.add_parser("mfu", help="GPU: model FLOPs utilisation of training steps, every attention backend")
    mfu.add_argument("--size", default="210m", help="model size (default: 210m)")
    mfu.add_argument("--seq-len", type=int, default=2048, help="tokens a sequence (default: 2048)")
    mfu.add_argument("--batch", type=int, default=8, help="sequences a step (default: 8)")
    mfu.add_argument("--backends", default="sdpa,flex,kernels,eager", help="comma-separated attention backends")
    mfu.add_argument("--objectives", default="MLM40,CLM", help="comma-separated objectives")
    mfu.add_argument("--steps", type=int, default=10, help="timed steps a variant (default: 10)")
    mfu.add_argument("--device", default="cuda", help="cuda (bf16); cpu runs the code in fp32, for testing")
    mfu.add_argument("--peak-tflops", type=float, default=None, help="the device's peak (default: known GPUs)")
    mfu.add_argument("--compile", action="store_true", help="torch.compile the model")
    mfu.set_defaults(run=_bench)
    gpu = b.add_parser("gpu", help="the prepared GPU check, rows never measured first (hashing a 1B checkpoint, "
                                   "the compiled CLM micro-batch 16, compiled FSDP 610M/1B), then parity, the 210M "
                                   "step, the largest micro-batch, eager FSDP, a small step, backends, micro-batches, "
                                   "loss chunks, compiled last -> OUT/gpu.csv")
    gpu.add_argument("out", help="the folder gpu.csv is written to (on a lent GPU: $OUT)")
    gpu.add_argument("--device", default="cuda", help="cuda (bf16); cpu runs the code in fp32, for testing")
    gpu.add_argument("--size", default="210m", help="model size of the step and parity rows (default: 210m)")
    gpu.add_argument("--seq-len", type=int, default=2048, help="tokens a sequence (default: 2048)")
    gpu.add_argument("--batches", default="8,16", help="comma-separated micro-batch sizes (default: 8,16)")
    gpu.add_argument("--fsdp-sizes", default="610m,1b", help="comma-separated sizes of the FSDP rows ('' for none); the last one's checkpoint is the one hashed")
    gpu.add_argument("--no-small", action="store_true", help="leave out the small scale's pretraining step")
    gpu.add_argument("--steps", type=int, default=10, help="timed steps a variant (default: 10)")
    gpu.add_argument("--budget", type=float, default=480, help="seconds from the check's start within which every "
                                                                "measurement ends, a running one stopped (default: "
                                                                "480, for a 10-minute command)")
    gpu.add_argument("--no-compile", action="store_true", help="leave out the compiled variants")
    gpu.add_argument("--peak-tflops", type=float, default=None, help="the device's peak (default: known GPUs)")
    gpu.set_defaults(run=_gpu_check)
    nb = b.add_parser("notebooks", help="time to regenerate every figure and table (the five notebooks)")
    nb.add_argument("--reps", type=int, default=1, help="repetitions (default: 1)")
    nb.set_defaults(run=_bench)


# the verbs' jobs: each imports its module, and torch with it, only when its verb runs


def _pretrain(args) -> int:
    from .training.pretrain import pretrain_command

    return pretrain_command(args)


def _data(args) -> int:
    from .training.pretrain import data_command

    return data_command(args)


def _finetune(args) -> int:
    from .evaluation.finetune import finetune_command

    return finetune_command(args)


def _bench(args) -> int:
    from .bench import bench_command

    return bench_command(args)


def _gpu_check(args) -> int:
    from .gpu_check import gpu_check_command

    return gpu_check_command(args)
