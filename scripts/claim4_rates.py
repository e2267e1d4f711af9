"""Claim 4 (CLM less sensitive to the fine-tuning learning rate) on a scale's committed runs, with every rate of the
grids and without the rates named on the command line: how much the verdict depends on the rate range (issue 60).

    .venv/bin/python scripts/claim4_rates.py twin 1.5e-2
"""

import sys

from mlmclm.analysis.judging import claims
from mlmclm.analysis.loading import results


def main(scale: str, *dropped: str) -> None:
    data = results.load("results", sources=["ours"], scale=scale)
    runs, scores = (d[d["scale"] == scale] for d in (data.runs, data.scores))
    for name, keep in (("every rate", runs), (f"without {', '.join(dropped)}",
                                              runs[~runs["lr"].round(8).isin([round(float(x), 8) for x in dropped])])):
        v = claims.verdicts(scores, keep, ["4"], full=True).iloc[0]
        print(f"claim 4 at {scale}, {name}: {v['value']:+.2f} [{v['ci_low']:+.2f}, {v['ci_high']:+.2f}] "
              f"{v['verdict']} (the test on the seeds p {v['seed_means_p']:.4f}){'; ' + v['reason'] if v['reason'] else ''}")


if __name__ == "__main__":
    main(*sys.argv[1:])
