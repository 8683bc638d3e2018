"""Label-free difficulty: agreement and answer entropy on hand-made samples, agreement as a pseudo pass rate,
the calibration statistics, and an unlabeled pool's answers."""

import math

import numpy as np
import pandas as pd
import pytest

from grpo_budget.aggregate import calibration
from grpo_budget.errors import UserError
from grpo_budget.config.settings import Analysis
from grpo_budget.generation import sample
from grpo_budget.score.agreement import (
    AGREEMENT_COLUMNS,
    Majority,
    agreement,
    agreement_columns,
    answer_entropy,
    majority,
)
from grpo_budget.select import posterior, sources


def test_unanimous():
    assert majority(["3", "3", "3", "3"]) == Majority("3", 4, False)
    assert agreement(["3"] * 4) == 1.0 and answer_entropy(["3"] * 4) == 0.0


def test_plain_majority():
    a = ["3", "5", "3", "7"]
    assert majority(a) == Majority("3", 2, False)
    assert agreement(a) == 0.5
    assert answer_entropy(a) == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))


def test_tie_keeps_the_first_seen_answer_and_is_flagged():
    assert majority(["5", "3", "3", "5"]) == Majority("5", 2, True)
    assert majority(["3", "5", "5", "3"]) == Majority("3", 2, True)
    assert agreement(["5", "3", "3", "5"]) == 0.5


def test_all_different_answers():
    a = ["1", "2", "3", "4"]
    m = majority(a)
    assert (m.answer, m.count, m.tied) == ("1", 1, True)
    assert agreement(a) == 0.25 and answer_entropy(a) == pytest.approx(math.log(4))


def test_unparseable_answers_agree_with_nothing():
    a = ["3", None, None, "3"]
    assert majority(a) == Majority("3", 2, False)
    assert agreement(a) == 0.5  # the denominator is every sample, parsed or not
    # each unparseable sample is an answer of its own: {3: 2, None: 1, None: 1}
    assert answer_entropy(a) == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))
    assert majority([None, None]) == Majority(None, 0, False)
    assert agreement([None, None]) == 0.0 and answer_entropy([None, None]) == pytest.approx(math.log(2))
    assert math.isnan(agreement([])) and math.isnan(answer_entropy([]))


def test_agreement_columns():
    out = agreement_columns(pd.Series([["1", "1", "2"], [None, None, None], ["4", "5", "5"]]))
    assert list(out["majority_answer"].fillna("-")) == ["1", "-", "5"]
    assert list(out["n_agree"]) == [2, 0, 2]
    assert list(out["majority_tied"]) == [False, False, False]


@pytest.mark.parametrize("arm, expected", [("hard", ("hard", "labels")), ("hard@agreement", ("hard", "agreement")),
                                           ("learnable@proxy_agreement", ("learnable", "proxy_agreement"))])
def test_split_arm(arm, expected):
    assert sources.split_arm(arm) == expected


def scored(k_correct, n_agree, n=4):
    return pd.DataFrame({"id": [f"i{i}" for i in range(len(k_correct))], "n_samples": n,
                         "n_correct": k_correct, "pass_rate": np.asarray(k_correct) / n,
                         "n_agree": n_agree, "agreement": np.asarray(n_agree) / n})


def test_ranking_counts_take_the_agreement_in_place_of_the_graded_counts():
    s = scored([0, 1, 4], [1, 3, 4])
    assert sources.ranking_counts(s, "labels") is s
    r = sources.ranking_counts(s, "agreement")
    assert list(r["n_correct"]) == [1, 3, 4] and list(r["pass_rate"]) == [0.25, 0.75, 1.0]
    assert r["pass_rate_eb"].is_monotonic_increasing and len(set(r["eb_prior_a"])) == 1
    unlabeled = s.assign(n_correct=np.nan, pass_rate=np.nan)
    with pytest.raises(ValueError, match="needs gold answers"):
        sources.ranking_counts(unlabeled, "labels")
    assert list(sources.ranking_counts(unlabeled, "agreement")["n_correct"]) == [1, 3, 4]


def test_select_by_agreement_buys_the_least_agreeing_items_but_keeps_the_gold_columns():
    from grpo_budget.select.policies import select

    s = scored([0, 4, 2, 3], [4, 1, 2, 3])  # i0: a confident wrong majority (agreement 1, gold 0)
    out = select(s, "hard@agreement", 2, seed=0)
    assert sorted(out["id"]) == ["i1", "i2"]
    assert sorted(out["pass_rate"]) == [0.5, 1.0]  # the gold pass rates, for the analysis
    assert sorted(out["difficulty"]) == pytest.approx(sorted(sources.ranking_counts(s, "agreement")
                                                            .set_index("id").loc[["i1", "i2"], "pass_rate_eb"]))
    assert (out["difficulty_source"] == "agreement").all()
    assert (out["scoring_labels"] == 0).all()
    labels = select(s, "hard", 2, seed=0)
    assert sorted(labels["id"]) == ["i0", "i2"] and (labels["scoring_labels"] == 4).all()
    assert (select(s, "random", 2, seed=0)["scoring_labels"] == 0).all()  # random ranks nothing: no labels


def test_spearman_known_values():
    assert calibration.spearman(np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])) == pytest.approx(1.0)
    assert calibration.spearman(np.array([1, 2, 3, 4]), np.array([4, 3, 2, 1])) == pytest.approx(-1.0)
    # ties take average ranks: x ranks (1.5, 1.5, 3), y ranks (1, 2, 3)
    assert calibration.spearman(np.array([0, 0, 1]), np.array([1, 2, 3])) == pytest.approx(np.sqrt(3) / 2)
    assert math.isnan(calibration.spearman(np.zeros(5), np.arange(5)))
    rho, lo, hi = calibration.spearman_ci(np.arange(50), np.arange(50) + np.tile([0, 3], 25), 200, 0)
    assert lo <= rho <= hi and rho > 0.9


def test_tiers_and_confident_wrong():
    assert [calibration.tier_of(p) for p in (0.0, 0.1, 0.25, 0.5, 0.76, 1.0)] == \
        ["0", "(0, 0.25]", "(0, 0.25]", "(0.25, 0.5]", "(0.75, 1]", "(0.75, 1]"]
    s = pd.DataFrame({
        "answers": [["7", "7", "7", "1"], ["1", "2", "3", "4"], ["5", "5", "5", "5"], ["5", "5", "6", "6"]],
        "correct": [[False] * 4, [False] * 4, [True] * 4, [True, True, False, False]],
        "pass_rate": [0.0, 0.0, 1.0, 0.5]})
    s = pd.concat([s, agreement_columns(s["answers"])], axis=1)
    t = calibration.confident_wrong(s).set_index("tier")
    assert t.loc["0", "items"] == 2 and t.loc["0", "confident_wrong"] == 0.5  # 7 (3 of 4) is wrong; 1/4 is not confident
    assert t.loc["(0.75, 1]", "confident_wrong"] == 0.0
    assert t.loc["(0.25, 0.5]", "confident_wrong"] == 0.0  # a tie at half is not confident
    assert t.loc["(0, 0.25]", "items"] == 0 and math.isnan(t.loc["(0, 0.25]", "confident_wrong"])


def test_unlabeled_pool_answers_are_attached_from_the_answers_file(tmp_path):
    from grpo_budget.prepare.splits import attach_answers

    path = tmp_path / "answers.csv"
    pd.DataFrame({"id": ["a", "b"], "answer": ["3", "7"]}).to_csv(path, index=False)
    items = pd.DataFrame({"id": ["a", "b"], "answer": [None, None]})
    assert list(attach_answers(items, {"answers": str(path)}, "subset.parquet")["answer"]) == ["3", "7"]
    with pytest.raises(UserError, match=r"subset.parquet: 1 selected item\(s\) have no gold answer .*: c;"):
        attach_answers(pd.DataFrame({"id": ["a", "c"], "answer": [None, None]}), {"answers": str(path)},
                       "subset.parquet")
    with pytest.raises(UserError, match="answers file needs columns id and answer"):
        bad = tmp_path / "bad.csv"
        pd.DataFrame({"id": ["a"], "gold": ["3"]}).to_csv(bad, index=False)
        attach_answers(items, {"answers": str(bad)}, "s")
    labeled = pd.DataFrame({"id": ["a"], "answer": ["9"]})
    assert attach_answers(labeled, {}, "s") is labeled


def test_calibration_table_known_answers(tmp_path):
    """Agreement that orders the pool exactly as the gold pass rate (ρ = 1, every subset the same), and a proxy that
    orders it backwards (ρ = -1, no overlap at the ends)."""
    from grpo_budget.experiment.plan import Listing, RunFiles, ScoreFile
    from grpo_budget.select.posterior import with_posterior

    n, K = 40, 8
    k = 1 + np.arange(n) % K  # gold correct counts 1..8, repeating
    ids = [f"i{i}" for i in range(n)]

    def table(k_correct, agree):
        answers = [["1"] * a + [str(j + 2) for j in range(K - a)] for a in agree]
        correct = [[True] * c + [False] * (K - c) for c in k_correct]  # the majority "1" is the correct answer
        t = pd.DataFrame({"id": ids, "answers": answers, "correct": correct, "n_samples": K, "n_correct": k_correct,
                          "pass_rate": np.asarray(k_correct) / K})
        return with_posterior(pd.concat([t, agreement_columns(t["answers"])], axis=1))

    gold = table(k, k)  # agreement = pass rate
    proxy = table(K + 1 - k, K + 1 - k)
    gold.to_parquet(tmp_path / "gold.parquet")
    proxy.to_parquet(tmp_path / "proxy.parquet")
    run = RunFiles("m", "d", "hard@agreement", "0.25", 0, "s", "l", "man", {})
    lst = Listing(runs=[run], base=[], scores=[ScoreFile("m", "d", str(tmp_path / "gold.parquet"))], tests={},
                  num_generations=8, prompts_per_step=4,
                  proxy_scores=[ScoreFile("p", "d", str(tmp_path / "proxy.parquet"))])
    t = calibration.label_free_calibration(lst, Analysis.from_dict({"n_boot": 200}))
    rho = t[t["measure"] == "rho"].set_index("source")
    assert rho.loc["agreement", "value"] == pytest.approx(1.0) and rho.loc["proxy", "value"] == pytest.approx(-1.0)
    assert rho.loc["answer_entropy", "value"] > 0.9  # fewer distinct answers, easier
    ov = t[t["measure"] == "overlap"].set_index(["source", "at"])["value"]
    assert ov[("agreement", "hard @ 0.25")] == pytest.approx(1.0) and ov[("proxy", "hard @ 0.25")] == 0.0
    cw = t[(t["measure"] == "confident_wrong") & (t["source"] == "agreement")]
    assert (cw["value"].fillna(0) == 0).all()  # every majority here is the correct answer


def test_a_pool_file_without_answers_loads_when_the_dataset_names_an_answers_file(tmp_path):
    """GSM8K-format files whose pool has empty answers: kept (answers withheld) rather than dropped as ungradable."""
    from grpo_budget.prepare.splits import build

    pd.DataFrame({"question": ["Tom has 3 apples and buys 2. How many?", "5 pens at $2?"],
                  "answer": pd.Series([None, None], dtype="string")}).to_parquet(tmp_path / "train.parquet")
    pd.DataFrame({"question": ["1 + 1?"], "answer": ["1+1=2\n#### 2"]}).to_parquet(tmp_path / "test.parquet")
    (tmp_path / "answers.csv").write_text("id,answer\n")
    ds = {"source": "benchmark", "benchmark": "gsm8k", "seed": 0, "answers": str(tmp_path / "answers.csv"),
          "spec": {"data_files": {"train": str(tmp_path / "train.parquet"), "test": str(tmp_path / "test.parquet")},
                   "cache_dir": str(tmp_path / "cache")}}
    frames = build(ds)
    assert len(frames["pool"]) == 2 and frames["pool"]["answer"].isna().all()
    assert list(frames["test"]["answer"]) == ["2"]
    with pytest.raises(UserError, match="all 2 rows were dropped because no gold answer could be parsed"):  # without answers: the pool's items are ungradable, dropped
        build({k: v for k, v in ds.items() if k != "answers"})


def test_a_proxy_arms_subset_says_its_statistics_are_the_proxys():
    from grpo_budget.select.policies import select

    stats_cols = [c for c in sample.GRADED_COLUMNS if c not in ("id", "samples", "answers", "correct", "format_ok")]
    assert set(sources.SCORED_BY_COLUMNS) == set(stats_cols + posterior.EB_COLUMNS + AGREEMENT_COLUMNS)
    s = scored([0, 4, 2, 3], [4, 1, 2, 3])
    out = select(s, "hard@proxy", 2, seed=0)
    assert sorted(out["proxy_pass_rate"]) == [0.0, 0.5] and out["pass_rate"].isna().all()
    assert "n_correct" not in out and (out["scoring_labels"] == 4).all()
