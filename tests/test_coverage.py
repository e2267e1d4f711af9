"""The intervals of ours cover (issue 45, item 3): a simulation with known effects on a small case, and the pieces it
rests on."""

import numpy as np
import pandas as pd

from mlmclm.analysis.judging import bootstrap, coverage
from mlmclm.analysis.loading import aggregation, ids


def _runs(seed: int = 0) -> pd.DataFrame:
    """A small scale: three families on one SC dataset (two of three pretraining seeds, one of one), three rates,
    three fine-tuning seeds; scores with a pretraining-seed effect, a rate profile and correlated run noise."""
    rng, rows = np.random.default_rng(seed), []
    for family, level, seeds in (("m-clm-100", 60.0, 3), ("m-mlm40-100", 61.0, 3), ("m-mlm20-100", 62.0, 1)):
        for p in range(seeds):
            model, a = family + (f"-p{p}" if p else ""), rng.normal(0, 0.5)
            for lr, bump in ((1e-3, -1.0), (3e-3, 0.0), (1e-2, -0.5)):
                for sd in range(3):
                    u = rng.normal(0, 0.8)
                    rows.append({"source": "ours", "scale": "x", "model": model, "family": family,
                                 "objective": "clm", "task_group": "SC", "dataset": "toy", "grid": "default",
                                 "lr": lr, "seed": sd, "test": level + bump + a + u, "validation": level + bump + a + 0.7 * u +
                                 rng.normal(0, 0.5)})
    return pd.DataFrame(rows)


def test_the_intervals_cover_a_known_difference_and_a_too_narrow_one_does_not():
    """1,000 draws of the small scale from its own components: the 95% intervals of the three differences cover the
    true one in 93-97% of them; the same draws with the spread taken as known (no Student-t: its 4 df ignored)
    cover too rarely, so the check can fail."""
    runs = _runs()
    pairs = coverage.simulate(runs, replicas=1000, n_boot=1000, batch=500)
    assert len(pairs) == 3 and pairs["covered"].between(0.93, 0.97).all(), pairs

    def known(avg):
        return bootstrap.pretraining_seed_spread(None, averages=avg).assign(dof=10 ** 6)

    narrow = coverage.simulate(runs, replicas=1000, n_boot=1000, batch=500, spread=known)
    assert (narrow["covered"] < 0.92).all(), narrow


def test_the_simulated_point_estimates_are_the_aggregations():
    """The simulation's group averages are `aggregation.aggregate`'s, and its components come back from runs drawn
    from them."""
    c = coverage.components(_runs())
    sim = coverage.synthetic_runs(c, 2, np.random.default_rng(1))
    ours = coverage.synthetic_averages(sim).set_index(["source", "model"])["score"].sort_index()
    attributes = sim.assign(**{a: 0 for a in ids.ATTRIBUTES}, flag="")  # what `aggregate` carries along
    theirs = ids.group_averages(aggregation.aggregate(attributes)).set_index(["source", "model"])["score"]
    assert np.allclose(ours, theirs.loc[ours.index])
    assert c.noise.loc["toy", "sd_test"] > 0.5 and 0 < c.noise.loc["toy", "rho"] < 1
    assert c.profile.loc[("toy", 3e-3), "test"] == c.profile.loc["toy", "test"].max()
    assert c.truth().loc[("SC", "m-mlm20-100")] > c.truth().loc[("SC", "m-clm-100")]


def test_student_p_matches_the_t_table():
    for dof in (1, 2, 3, 4, 7, 11, 30):
        assert abs(bootstrap.student_p(aggregation.t95(dof), dof) - 0.05) < 1e-4
    assert bootstrap.student_p(0.0, 3) == 1.0 and bootstrap.student_p(50.0, 2.5) < 1e-3


def test_seed_mean_replicas_give_the_student_t_interval_centred_on_the_estimate():
    """Two families of three seeds, a third of one: a difference's interval is d +- t(dof) x s x sqrt(1/3 + 1/3) from
    the pooled spread (4 df), centred exactly (antithetic draws)."""
    avg = pd.DataFrame({"source": "ours", "scale": "x", "task_group": "SC", "score": [1.0, 2.0, 3.0, 5.0, 5.5, 6.0, 9.0],
                        "model": ["a-clm-1", "a-clm-1-p1", "a-clm-1-p2", "a-mlm40-1", "a-mlm40-1-p1", "a-mlm40-1-p2",
                                  "a-mlm20-1"]})
    avg["family"] = avg["model"].str.replace("-p[12]$", "", regex=True)
    fams, draws = bootstrap.seed_mean_replicas(avg, 200000, 0)
    s = np.sqrt((2.0 + 0.5) / 4)
    diff = draws[:, 1] - draws[:, 0]
    lo, hi = bootstrap.percentile_bounds(diff)
    half = aggregation.t95(4) * s * np.sqrt(2 / 3)
    assert list(fams["k"]) == [3, 3, 1] and (fams["dof"] == 4).all()
    assert abs((lo + hi) / 2 - 3.5) < 1e-9 and abs((hi - lo) / 2 - half) < 0.02 * half


def test_welchs_interval_over_pretraining_seeds_covers():
    """Claim 4's interval (`bootstrap.welch_interval`): three seeds a family whose values (a seed's spread) scatter
    with unequal sds, 1,000 draws: the 95% interval of the difference covers the true one in 93-97% of them; with a
    normal quantile in place of Student's (the 2-4 df ignored) it covers too rarely."""
    rng = np.random.default_rng(0)
    covered, narrow = [], []
    for _ in range(1000):
        values = pd.DataFrame({"family": ["MLM"] * 3 + ["CLM"] * 3, "coef": [1.0] * 3 + [-1.0] * 3,
                               "value": np.r_[rng.normal(2.5, 0.6, 3), rng.normal(2.0, 0.2, 3)]})
        w = bootstrap.welch_interval(values)
        covered.append(w["lo"] <= 0.5 <= w["hi"])
        half = (w["hi"] - w["lo"]) / 2 * 1.96 / bootstrap.student_quantile(w["dof"])
        narrow.append(abs(w["value"] - 0.5) <= half)
    assert 0.93 <= np.mean(covered) <= 0.97, np.mean(covered)
    assert np.mean(narrow) < 0.90, np.mean(narrow)
