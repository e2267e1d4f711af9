"""A working folder outside the repository: `mlmclm init [FOLDER]` writes the five notebooks and the paper's tables.

Every path resolves against the working root (`io.working_root`: `$MLMCLM_ROOT`, else the nearest folder at or
above the working directory holding `results/paper/`, else the working directory), never the package's folder. A
checkout is a working folder already; an installed package ships the notebooks and the paper's tables as package
data (`mlmclm/shipped/`: links to `notebooks/`, `results/paper/` and `results/samples/` in a checkout) and
`mlmclm init` copies them into an empty folder, where `mlmclm pretrain`, `mlmclm study`, `mlmclm reproduce` and
`mlmclm notebooks` then work as in a checkout. Never imports torch.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .errors import ConfigError
from .io import atomic_path, check_writable, shown

SHIPPED = Path(__file__).resolve().parent / "shipped"
FILES = {"notebooks": ("notebooks", "*.ipynb"), "paper": ("results/paper", "*.csv"),  # shipped folder -> target
         "samples": ("results/samples", "*.csv")}


def init(folder: str | Path) -> list[Path]:
    """Copy the shipped notebooks and the paper's tables into `folder` (created when missing): the files that are
    not there yet, never overwriting one. Returns the files written; a `ConfigError` for a folder that cannot be
    written in (a file, read-only)."""
    folder = Path(folder)
    check_writable(folder)
    written = []
    for name, (target, pattern) in FILES.items():
        sources = sorted((SHIPPED / name).glob(pattern))
        if not sources:
            raise ConfigError(f"this mlmclm installation ships no {target} ({SHIPPED / name} is empty): reinstall "
                              "the package, or work in a clone of the repository")
        for src in sources:
            dest = folder / target / src.name
            if dest.exists() or dest.resolve() == src.resolve():
                continue
            with atomic_path(dest) as tmp:
                shutil.copyfile(src, tmp)
            written.append(dest)
    return written


def _init_cli(args) -> int:
    folder = Path(args.folder) if args.folder else args.root
    written = init(folder)
    print(f"{shown(folder)}: wrote {len(written)} files (notebooks/, results/paper/)" if written else
          f"{shown(folder)}: the notebooks and the paper's tables are already there")
    return 0


def add_options(p) -> None:
    """`mlmclm init`."""
    p.add_argument("folder", nargs="?", default=None,
                   help="where (default: the working root: $MLMCLM_ROOT, else the working directory)")
    p.set_defaults(run=_init_cli)
