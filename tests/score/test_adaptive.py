"""Adaptive scoring: the cut intervals, the settling rule, the round allocation, the learnable policy, and a killed
scoring job resuming from its last completed round."""

import numpy as np
import pandas as pd
import pytest

from grpo_budget import learnability
from grpo_budget.config.settings import Adaptive
from grpo_budget.prepare import framearith
from grpo_budget.score import adaptive, scoring
from grpo_budget.score.adaptive import Target
from grpo_budget.select import policies, posterior


def test_interval_of_a_contiguous_cut():
    means = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    order = np.argsort(means)
    assert adaptive.interval(means, order, np.array([0, 1])) == pytest.approx((0.0, 0.25))  # hard: from 0
    assert adaptive.interval(means, order, np.array([3, 4])) == pytest.approx((0.35, 1.0))  # easy: to 1
    assert adaptive.interval(means, order, np.array([1, 2])) == pytest.approx((0.15, 0.35))  # medium


def test_items_tied_at_the_cut_sit_on_its_edge():
    # Four items tie at the lowest estimate; hard buys two of them: the cut passes through the tie.
    means = np.array([0.03, 0.03, 0.03, 0.03, 0.5, 0.6])
    order = policies.difficulty_order(means, seed=0)
    lo, hi = adaptive.interval(means, order, order[:2])
    assert (lo, hi) == pytest.approx((0.0, 0.03))


def test_mass_inside_known_answers():
    assert adaptive.mass_inside(np.array([1.0]), np.array([1.0]), 0.2, 0.5) == pytest.approx([0.3])  # uniform
    # Beta(2, 1) has CDF x^2.
    assert adaptive.mass_inside(np.array([2.0]), np.array([1.0]), 0.0, 0.5) == pytest.approx([0.25])


def test_targets_are_the_ranking_policies_at_every_budget():
    t = adaptive.targets(["hard", "random", "easy", "full", "learnable"], [0.1, 50], 1000)
    assert t == [Target("hard", 100), Target("hard", 50), Target("easy", 100), Target("easy", 50),
                 Target("learnable", 100), Target("learnable", 50)]
    assert adaptive.targets(["random", "full"], [0.1], 1000) == []


def test_far_items_settle_and_items_at_the_cut_do_not():
    # 100 items at 0/40, 100 at 20/40, 100 at 40/40; hard buys 100: the 0/40 items are settled inside, the rest
    # outside. Then one 0/40 item turns into 1/2: it sits at the cut and is not settled.
    k = np.repeat([0, 20, 40], 100)
    n = np.full(300, 40)
    cut = [Target("hard", 100)]
    assert not adaptive.unsettled(k, n, cut, 0.9, seed=0).any()
    k2, n2 = k.copy(), n.copy()
    k2[:101], n2[:101] = np.r_[np.zeros(100, int), 1], np.r_[np.full(100, 40), 2]
    doubt = adaptive.unsettled(k2, n2, cut, 0.9, seed=0)
    assert doubt[100] and not doubt[101:].any()
    # an indifference zone as wide as the pass-rate range settles it: within tolerance counts as either side
    assert not adaptive.unsettled(k2, n2, cut, 0.9, seed=0, tolerance=0.5).any()


def test_allocation_rounds():
    s = Adaptive(first=4, step=3, max_samples=8, confidence=0.9, mean_samples=None, tolerance=0.0)
    cut = [Target("hard", 2)]
    # First round: every item gets `first`.
    assert list(adaptive.allocation(np.zeros(5, int), np.zeros(5, int), s, cut, 0)) == [4] * 5
    # Later: only items in doubt, capped at max_samples (7 + 3 > 8 gives 1, 8 gives 0).
    k, n = np.array([0, 0, 0, 4, 4]), np.array([4, 7, 8, 4, 4])
    more = adaptive.allocation(k, n, s, cut, 0)
    assert more[2] == 0 and more[1] in (0, 1) and set(more) <= {0, 1, 3}
    # Nothing to settle (no ranking policy): one round only.
    assert not adaptive.allocation(k, n, s, [], 0).any()


def test_the_total_cap_serves_the_most_doubtful_first():
    rng = np.random.default_rng(0)
    n = np.full(400, 4)
    k = rng.binomial(4, rng.beta(0.7, 1.2, 400))
    cut = [Target("hard", 40), Target("easy", 40)]
    free = Adaptive(first=4, step=4, max_samples=32, confidence=0.9, mean_samples=None, tolerance=0.0)
    want = adaptive.allocation(k, n, free, cut, 0)
    assert 0 < want.sum() < 1600
    capped = Adaptive(first=4, step=4, max_samples=32, confidence=0.9, mean_samples=4.5, tolerance=0.0)
    more = adaptive.allocation(k, n, capped, cut, 0)
    assert 0 < more.sum() <= 200 and set(np.flatnonzero(more)) <= set(np.flatnonzero(want))
    d = adaptive.doubt(posterior.posterior_table(k, n), cut, 0)
    assert d[more > 0].min() >= d[(want > 0) & (more == 0)].max()  # none left out was more in doubt
    spent = Adaptive(first=4, step=4, max_samples=32, confidence=0.9, mean_samples=4, tolerance=0.0)
    assert not adaptive.allocation(k, n, spent, cut, 0).any()  # the cap is spent: scoring is done


def test_a_settled_pool_spends_what_is_left_of_its_budget_where_doubt_is_left():
    # 100 items at 0/8 and 100 at 8/8, hard buys 100: the 0/8 items are settled inside at confidence 0.9, the
    # 8/8 ones outside; a 4/8 item sits at the cut's edge with a little doubt left. With budget left, the items
    # with any doubt get samples, most doubtful first; without a total, scoring stops.
    k = np.r_[np.zeros(100, int), np.full(100, 8), 4]
    n = np.full(201, 8)
    cut = [Target("hard", 100)]
    d = adaptive.doubt(posterior.posterior_table(k, n), cut, 0, tolerance=0.05)
    assert d.max() < 0.1 and (d > 0).any()
    budget = Adaptive(first=2, step=2, max_samples=32, confidence=0.9, mean_samples=9, tolerance=0.05)
    more = adaptive.allocation(k, n, budget, cut, 0)
    assert set(more) == {0, 2} and (d[more > 0] > 0).all() and (more[d == 0] == 0).all()
    assert more.sum() <= 201 and d[more > 0].min() >= d[(d > 0) & (more == 0)].max(initial=0)
    assert not adaptive.allocation(k, n, Adaptive(2, 2, 32, 0.9, None, 0.05), cut, 0).any()


def _rounds(p, s, cuts, seed):
    """Adaptive rounds on a pool of known pass rates ``p`` (binomial draws stand for the model): (k, n, first k)."""
    rng = np.random.default_rng(seed)
    k, n, first = np.zeros(len(p), int), np.zeros(len(p), int), None
    while (more := adaptive.allocation(k, n, s, cuts, 0, 8)).any():
        k, n = k + rng.binomial(more, p), n + more
        first = k.copy() if first is None else first
    return k, n, first


@pytest.mark.parametrize("mirror, seed", [(False, 0), (False, 2), (True, 2)])
def test_a_mostly_unsolved_pool_gets_its_whole_budget(mirror, seed):
    # True pass rates from Beta(5, 45) (mean 0.1, sd 0.04; mirrored: mean 0.9): after the first round about 80% of
    # the items are at 0/2 (at 2/2). The embedded default's settings and cuts: the pool gets its 8 samples per item
    # in all (before, with these draws, the prior collapsed, nothing was in doubt and scoring stopped at 2 to 4).
    p = np.random.default_rng(7).beta(5, 45, 1000)
    p = 1 - p if mirror else p
    s = Adaptive(first=2, step=2, max_samples=32, confidence=0.9, mean_samples=8, tolerance=0.05)
    cuts = adaptive.targets(["easy", "medium", "hard", "learnable"], [0.1], 1000)
    k, n, first = _rounds(p, s, cuts, seed)
    assert 0.75 < np.mean(first == (2 if mirror else 0)) < 0.85
    assert n.sum() == 8000
    # spent where the cuts are: the items hard and easy buy at the end got at least the pool's mean
    table = _scored(k, n)
    for policy in ("hard", "easy"):
        chosen = policies.select(table, policy, 0.1, seed=0)["id"].str[1:].astype(int).to_numpy()
        assert n[chosen].mean() >= 8


def test_chosen_items_of_a_narrow_window_stay_in_doubt():
    # medium buys 10 of 300 items spread evenly over (0, 1) at 8 samples each: its window is narrow in pass-rate
    # terms, so no item is surely inside it; the chosen ones are in doubt (they could be outside), while the
    # items far from the window are settled outside.
    rates = np.linspace(0.02, 0.98, 300)
    k, n = np.round(rates * 8).astype(int), np.full(300, 8)
    d = adaptive.doubt(posterior.posterior_table(k, n), [Target("medium", 10)], seed=0)
    table = posterior.posterior_table(k, n)
    order = policies.difficulty_order(table["pass_rate_eb"].to_numpy(), 0)
    chosen = order[145:155]
    assert (d[chosen] > 0.1).all()
    assert (d[(rates < 0.1) | (rates > 0.9)] < 0.1).all()


def test_a_tolerance_settles_items_at_the_cut():
    # 200 items evenly spread, 32 samples each: ties of about six items per count. Hard buys 10, so its cut runs
    # through a tie: those items never settle on one side, but within a tolerance of 0.1 either side will do.
    k = np.round(np.linspace(0, 1, 200) * 32).astype(int)
    n = np.full(200, 32)
    table = posterior.posterior_table(k, n)
    cut = [Target("hard", 10)]
    strict, lenient = adaptive.doubt(table, cut, 0), adaptive.doubt(table, cut, 0, tolerance=0.1)
    at_cut = k == k[policies.difficulty_order(table["pass_rate_eb"].to_numpy(), 0)[9]]
    assert (strict[at_cut] > 0.1).any() and (lenient[at_cut] < 0.1).all()
    assert (lenient <= strict + 1e-12).all()


def _scored(k, n):
    t = posterior.posterior_table(np.asarray(k), np.asarray(n))
    return t.assign(id=[f"i{j}" for j in range(len(t))], pass_rate=t["n_correct"] / t["n_samples"])


def test_learnable_policy_buys_the_mixed_items():
    # G = 8: an item at 4/8 is mixed in almost every group, one at 0/8 or 8/8 almost never.
    scores = _scored([0, 0, 8, 8, 4, 3, 5, 1], [8] * 8)
    chosen = policies.select(scores, "learnable", 3, seed=0, num_generations=8)
    assert set(chosen["n_correct"]) == {3, 4, 5}
    exp = policies.learnable_scores(scores, 8)
    a, b = posterior.posterior(scores)
    assert exp == pytest.approx(learnability.expected_learnable_beta(a, b, 8))
    with pytest.raises(ValueError, match="group size"):
        policies.select(scores, "learnable", 3, seed=0)


def test_eb_order_equals_the_pass_rate_order_at_fixed_k():
    rng = np.random.default_rng(1)
    k = rng.binomial(8, rng.uniform(size=300))
    with_eb = _scored(k, [8] * 300)
    without = with_eb.drop(columns=["pass_rate_eb"])
    for policy in ("hard", "medium", "easy"):
        for seed in (0, 1):
            assert list(policies.select(with_eb, policy, 0.1, seed)["id"]) == \
                list(policies.select(without, policy, 0.1, seed)["id"])


def test_unequal_counts_rank_the_surer_zero_harder():
    scores = _scored([0, 0, 3], [32, 4, 8])
    assert list(policies.select(scores, "hard", 1, seed=0)["id"]) == ["i0"]


class Killed(BaseException):
    """Stands for SIGKILL: not an Exception, so nothing in the job catches it."""


class KilledAfter:
    """A generator that dies on its ``calls``-th generate call (mid-round), counting calls."""

    def __init__(self, gen, calls=None):
        self.gen, self.calls, self.n = gen, calls, 0
        self.tokenizer, self.template_kwargs = gen.tokenizer, gen.template_kwargs

    def generate(self, *args, **kwargs):
        self.n += 1
        if self.calls is not None and self.n == self.calls:
            raise Killed
        return self.gen.generate(*args, **kwargs)


@pytest.mark.slow
def test_a_killed_adaptive_job_resumes_from_its_last_completed_round(tmp_path, tiny_model_dir):
    from grpo_budget.config.settings import Generation
    from grpo_budget.generation.backends import from_settings

    pool = framearith.generate(60, seed=0, width=4, min_ops=1, max_ops=3)
    dataset = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
    g = Generation.from_dict({"max_new_tokens": 6, "batch_size": 256, "seed": 3})
    s = Adaptive(first=2, step=2, max_samples=12, confidence=0.9, mean_samples=None, tolerance=0.0)
    cuts = {"policies": ["hard", "easy", "medium"], "budgets": [0.2], "rounding": "half_up", "group_size": 4}
    record = {"model": str(tiny_model_dir)}
    gen = from_settings(str(tiny_model_dir), g)

    whole = KilledAfter(gen)
    ref = scoring.score_in_rounds(whole, pool, dataset, g, s, cuts, tmp_path / "ref.rounds", record)
    assert whole.n >= 4, "the test needs several rounds"
    assert not (tmp_path / "ref.rounds").exists()  # removed once complete
    assert ref["n_samples"].between(2, 12).all()  # (an untrained model: every item stays in doubt to the cap)

    folder = tmp_path / "run.rounds"
    with pytest.raises(Killed):
        scoring.score_in_rounds(KilledAfter(gen, calls=3), pool, dataset, g, s, cuts, folder, record)
    assert sorted(p.name for p in folder.glob("round-*")) == ["round-000.parquet", "round-001.parquet"]
    resumed = KilledAfter(gen)
    out = scoring.score_in_rounds(resumed, pool, dataset, g, s, cuts, folder, record)
    assert resumed.n == whole.n - 2  # the two completed rounds were not drawn again
    pd.testing.assert_frame_equal(out, ref)

    # Rounds of other settings are never resumed from: moved aside, and scoring starts afresh.
    with pytest.raises(Killed):
        scoring.score_in_rounds(KilledAfter(gen, calls=2), pool, dataset, g, s, cuts, folder, record)
    other = KilledAfter(gen)
    scoring.score_in_rounds(other, pool, dataset, g, s, dict(cuts, budgets=[0.3]), folder, record)
    assert (tmp_path / "run.rounds.stale-1" / "round-000.parquet").exists()
    assert other.n >= 2
