"""The answer sentence on verdict tables with known verdicts: winners, a mixed case, nothing distinguishable, one arm;
the overlap of subsets; and the lead paragraphs read back from the Markdown."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from grpo_budget.aggregate import answer, render

ARMS5 = ["easy", "medium", "hard", "learnable", "random"]


def verdicts(accs: dict[str, float], better: set[tuple[str, str]], seeds: int = 2, needed: float = 12.0,
             detectable: float = 6.8, half_width: float = 3.0) -> pd.DataFrame:
    """A verdict table of one panel: every pair, A − B from ``accs`` with an interval of ± ``half_width`` points,
    decided exactly for the pairs in ``better`` (winner, loser)."""
    rows = []
    for a, b in itertools.combinations(accs, 2):
        d = 100 * (accs[a] - accs[b])
        verdict = f"{a} better" if (a, b) in better else f"{b} better" if (b, a) in better else "not distinguishable"
        rows.append({"model": "tiny", "dataset": "fa", "evalset": "fa", "budget": "0.1", "ood": False,
                     "arm_a": a, "arm_b": b, "seeds_a": seeds, "seeds_b": seeds, "acc_a": accs[a], "acc_b": accs[b],
                     "diff_pts": d, "diff_lo": d - half_width, "diff_hi": d + half_width, "verdict": verdict,
                     "detectable_pts": detectable if seeds > 1 else np.nan,
                     "seeds_needed": (needed if seeds > 1 else np.nan) if verdict == "not distinguishable" else np.nan})
    return pd.DataFrame(rows)


def gains(accs: dict[str, float], base: float = 0.3) -> pd.DataFrame:
    return pd.DataFrame([{"model": "tiny", "dataset": "fa", "evalset": "fa", "budget": "0.1", "ood": False,
                          "policy": p, "base_acc": base, "final_acc": a, "gain_pts": 100 * (a - base),
                          "gain_lo": 100 * (a - base) - 2, "gain_hi": 100 * (a - base) + 2} for p, a in accs.items()])


def one(accs, better, **kw) -> str:
    (line,) = answer.answer_sentences(verdicts(accs, better, **kw), gains(accs))
    assert line.startswith("**tiny · fa · budget 0.1:** ")
    body = line.split(":** ", 1)[1]
    assert len(body) <= answer.MAX_CHARS, (len(body), body)
    return body


def test_nothing_distinguishable_is_said_once_with_the_range_what_is_detectable_and_what_would_settle_it():
    accs = {"easy": 0.351, "medium": 0.376, "hard": 0.372, "learnable": 0.374, "random": 0.371}
    body = one(accs, set())
    assert body == ("No subset bought distinguishably more than another: gains ran from +5.1 (easy) to +7.6 "
                    "(medium) points over the base's 30.0%; these runs detect differences of 6.8 points or more, "
                    "and the largest gap, medium − easy +2.5 [−0.5, +5.5], would need 12 seeds per arm to settle "
                    "(80% power).")
    assert "ranks first" not in body and body.count("No subset") == 1
    assert "would need more test items to settle" in one(accs, set(), needed=np.inf)
    single = one(accs, set(), seeds=1)  # one seed per arm: run-to-run variance unknown, nothing detectable to quote
    assert "detect" not in single and "needs 2 or more seeds per arm to say what would settle it" in single


def test_one_winner_above_every_other_arm_with_the_closest_margin():
    accs = {"easy": 0.35, "medium": 0.45, "hard": 0.40, "learnable": 0.38, "random": 0.39}
    body = one(accs, {("medium", a) for a in accs if a != "medium"})
    assert body == ("medium bought the most (+15.0 [+13.0, +17.0] points over the base's 30.0%), distinguishably "
                    "above every other arm (the closest, medium − hard, by +5.0 [+2.0, +8.0]).")


def test_mixed_winners_what_they_beat_then_the_arms_nothing_separates():
    """random and hard each beat learnable and easy; medium is tied with both winners (and beats nothing)."""
    accs = {"easy": 0.43, "medium": 0.51, "hard": 0.551, "learnable": 0.50, "random": 0.555}
    better = {(w, lo) for w in ("random", "hard") for lo in ("learnable", "easy")}
    body = one(accs, better)
    assert body.startswith("random and hard bought the most (random +25.5 [+23.5, +27.5], hard +25.1 [+23.1, "
                           "+27.1] points over the base's 30.0%), distinguishably above learnable and easy")
    assert "(the closest, hard − learnable, by +5.1 [+2.1, +8.1])" in body
    assert body.endswith("; nothing separates medium from them.")


def test_an_arm_beaten_by_one_winner_only_is_not_said_to_be_beaten_by_both():
    accs = {"a": 0.6, "b": 0.59, "c": 0.5, "d": 0.4}
    body = one(accs, {("a", "c"), ("a", "d"), ("b", "d")})
    assert body.startswith("a and b bought the most") and "distinguishably above d" in body
    assert body.endswith("nothing separates c from them.")


def test_winners_that_beat_different_arms_say_which_each_beats():
    accs = {"a": 0.6, "b": 0.6, "c": 0.5, "d": 0.5}
    body = one(accs, {("a", "c"), ("b", "d")})
    assert "a distinguishably above c; b distinguishably above d" in body


def test_one_arm_alone():
    assert one({"hard": 0.4}, set()) == ("hard gained +10.0 [+8.0, +12.0] points over the base's 30.0%; one arm "
                                         "alone, nothing to compare it with.")


def test_one_sentence_per_budget_and_none_for_out_of_distribution_sets():
    accs = {"hard": 0.4, "easy": 0.35}
    v = pd.concat([verdicts(accs, set()), verdicts(accs, set()).assign(budget="0.2"),
                   verdicts(accs, set()).assign(evalset="ood", ood=True)])
    g = pd.concat([gains(accs), gains(accs).assign(budget="0.2"), gains(accs).assign(evalset="ood", ood=True)])
    lines = answer.answer_sentences(v, g)
    assert [x.split(":** ")[0] for x in lines] == ["**tiny · fa · budget 0.1", "**tiny · fa · budget 0.2"]


def test_subset_overlap_and_its_note():
    ids = {p: [set(range(i, i + 100)), set(range(i + 1, i + 101))] for p, i in (("easy", 0), ("learnable", 5),
                                                                                   ("hard", 900))}
    shares = answer.subset_overlap({("tiny", "fa", "0.1"): ids})
    row = shares[(shares["arm_a"] == "easy") & (shares["arm_b"] == "learnable")].iloc[0]
    assert row["shared"] == 95 and row["size"] == 100 and row["share"] == pytest.approx(0.95)
    assert shares[(shares["arm_a"] == "easy") & (shares["arm_b"] == "hard")]["shared"].iloc[0] == 0
    assert answer.overlap_note(shares) == ("Overlap: easy and learnable bought 95 of the same 100 items (95%), so a "
                                           "verdict between them says little.")
    assert answer.overlap_note(shares[shares["arm_b"] == "hard"]) == ""


def test_the_answer_reads_back_from_the_markdown_and_renders_in_html(tmp_path):
    lead = ["**tiny · fa · budget 0.1:** hard bought the most.", "Overlap: none `here`."]
    render.write_outputs([None, tmp_path / "t.md", tmp_path / "t.html"], pd.DataFrame(), "Title", "A note.",
                          [("h", pd.DataFrame({"x": [1]}), [])], lead)
    assert render.read_answer(tmp_path / "t.md") == lead
    page = (tmp_path / "t.html").read_text()
    assert "<strong>tiny · fa · budget 0.1:</strong> hard bought the most." in page and "**" not in page
    assert "<code>here</code>" in page
    assert page.index("hard bought the most") < page.index("A note.")  # the answer before the legend
    render.write_outputs([None, tmp_path / "u.md"], pd.DataFrame(), "Title", "A note.", [])
    assert render.read_answer(tmp_path / "u.md") == []
