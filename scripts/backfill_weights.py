"""Historical: added `weights_i` (the words of each sentence) to the committed tag-accuracy results that predated it (it rewrote
the committed results once; nothing calls it now).

Fine-tuning writes `weights_i` beside `scores_i` for a word-level accuracy since the hierarchical bootstrap needs them
to resample the score exactly (`mlmclm.analysis.judging.bootstrap`). Results written before hold the per-sentence accuracies
only. The words of each evaluated sentence are a property of the dataset, not of the run: this script reads them from
the built offline task (`mlmclm tasks build --datasets brown_upos`), capped as the run was (`meta.config.max_eval`),
checks that the word-weighted mean of the run's own `scores_i` reproduces its stored score to 1e-9 (else it stops,
naming the file), and writes them with `meta.weights_i_added` saying so. Re-running it changes nothing.

    .venv/bin/python scripts/backfill_weights.py results/runs
"""

import sys
from pathlib import Path

from mlmclm.evaluation.tasks import SUITES, load_task, tasks_dir
from mlmclm.io import read_json, working_root, write_json

# the note the committed results carry, under the script's path when it ran
NOTE = "added after the run by results/runs/backfill_weights.py: words per sentence of the evaluated split"


def backfill(root: Path, data_dir: Path) -> int:
    """Backfill the results under `root` from the offline suite built in `data_dir` (`tasks.tasks_dir`)."""
    splits_of, changed = {}, 0
    for path in sorted(root.rglob("results.json")):
        doc = read_json(path)
        meta = doc.get("meta", {})
        if meta.get("metric") != "tag_accuracy" or all("weights_i" in doc[s] for s in ("validation", "test")):
            continue
        key = (meta["suite"], meta["dataset"], meta["config"]["max_eval"])
        if key not in splits_of:
            splits_of[key] = load_task(SUITES[key[0]][key[1]], data_dir if key[0] == "offline" else None,
                                       max_eval=key[2])
        for split in ("validation", "test"):
            words = [len(row["tags"]) for row in splits_of[key][split]]
            scores = doc[split]["scores_i"]
            weighted = sum(s * w for s, w in zip(scores, words, strict=True)) / sum(words)
            if abs(weighted - doc[split]["score"]) > 1e-9:
                raise SystemExit(f"{path}: the word-weighted {split} score {weighted} is not the stored "
                                 f"{doc[split]['score']}: these are not the sentences it was scored on")
            doc[split]["weights_i"] = words
        meta["weights_i_added"] = NOTE
        write_json(path, doc)
        changed += 1
    return changed


if __name__ == "__main__":
    runs = Path(sys.argv[1] if len(sys.argv) > 1 else 'results/runs')
    print(f"{backfill(runs, tasks_dir(working_root()))} results.json updated")  # an entrance: reads the working root
