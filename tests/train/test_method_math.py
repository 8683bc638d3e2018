"""The methods' math with known answers: Guide's shaping and the other forms of the guided objective, the weights
and normalisations they log; CoDaPO's percentile selection against a transcription of the reference's own loop;
dynamic sampling's filter and what it does at its cap; what TRL's vLLM importance-sampling correction zeroes or
clips."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
import torch

from grpo_budget.train import capping, guidance, objective, offpolicy, refocus

EPS = {"epsilon_low": 0.2, "epsilon_high": 0.2, "delta": 4.0}

# --- the guided objective ---------------------------------------------------------------------------------------------


def test_guides_shaping_on_hand_made_ratios():
    """r / (r + gamma), gamma the 90th percentile (linear) of the row's ratios, unclipped."""
    r = torch.tensor([[0.5, 1.0, 2.0, 4.0], [0.001, 0.002, 7.0, 7.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    g = offpolicy.gamma(r, mask, 0.9, "rollout")
    # row 0: sorted 0.5 1 2 4, position 0.9 x 3 = 2.7 -> 2 + 0.7 x 2 = 3.4; row 1: 0.001 + 0.9 x 0.001 (padding out)
    np.testing.assert_allclose(g.squeeze(1).numpy(), [3.4, 0.0019], rtol=1e-6)
    loss = offpolicy.surrogate(r, torch.ones(2, 1), "shape", gamma_=g, **EPS)
    want = [[0.5 / 3.9, 1 / 4.4, 2 / 5.4, 4 / 7.4], [0.001 / 0.0029, 0.002 / 0.0039]]
    np.testing.assert_allclose(-loss[0].numpy(), want[0], rtol=1e-6)
    np.testing.assert_allclose(-loss[1, :2].numpy(), want[1], rtol=1e-5)  # tiny ratios weigh O(1), not 0.002
    # no clip: a ratio of 40 with a negative advantage weighs 40/(40 + gamma), no more
    big = torch.tensor([[40.0, 1.0]])
    out = offpolicy.surrogate(big, -torch.ones(1, 1), "shape", gamma_=torch.tensor([[2.0]]), **EPS)
    np.testing.assert_allclose(out.numpy(), [[40 / 42, 1 / 3]], rtol=1e-6)
    # over the micro-batch: one gamma for the six tokens in the mask (position 4.5: 2 + 0.5 x 2); floored at 1e-4
    np.testing.assert_allclose(float(offpolicy.gamma(r, mask, 0.9, "micro_batch")), 3.0, rtol=1e-6)
    assert float(offpolicy.gamma(torch.tensor([[1e-6, 2e-6]]), torch.ones(1, 2), 0.9, "rollout")) == pytest.approx(1e-4)


def test_each_forms_token_weights_by_hand():
    """d loss_t / d log pi_t over |A|: PPO's r where its clip leaves the token, 0 where the clip holds; the two-sided
    clip also zeroes a negative-advantage ratio above delta; shaping gamma r / (r + gamma)^2."""
    r = torch.tensor([[0.5, 1.0, 1.5, 3.0, 10.0]])
    logps, old, mask = torch.log(r), torch.zeros_like(r), torch.ones_like(r)
    kw = dict(quantile=0.9, over="rollout", **EPS)

    def weights(form, sign):
        return (offpolicy.token_gradients(logps, old, torch.tensor([sign]), mask, form, **kw).abs()).squeeze(0).numpy()

    np.testing.assert_allclose(weights("ppo", 1.0), [0.5, 1.0, 0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(weights("ppo", -1.0), [0, 1.0, 1.5, 3.0, 10.0], rtol=1e-5)
    np.testing.assert_allclose(weights("delta", -1.0), [0, 1.0, 1.5, 3.0, 0], rtol=1e-5)
    g = 3.0 + 0.6 * 7.0  # 90th percentile of 0.5 1 1.5 3 10: position 3.6
    np.testing.assert_allclose(weights("shape", 1.0), (g * r / (r + g) ** 2).squeeze(0).numpy(), rtol=1e-5)
    with pytest.raises(ValueError, match="allowed: shape, delta, ppo"):
        offpolicy.surrogate(r, torch.ones(1, 1), "clip", **EPS)


def test_the_loss_weights_follow_trls_normalisation_per_loss_type():
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    w = offpolicy.loss_weights(mask, "grpo", max_completion_length=4, accumulation=2)
    np.testing.assert_allclose(w.numpy(), [[1 / 8, 1 / 8, 0, 0], [1 / 16] * 4])  # row means, mean of rows, / 2
    np.testing.assert_allclose(offpolicy.loss_weights(mask, "bnpo", max_completion_length=4).numpy(), mask / 6)
    np.testing.assert_allclose(offpolicy.loss_weights(mask, "dr_grpo", max_completion_length=4).numpy(), mask / 8)
    # dapo: the generation batch's tokens, per process, per accumulation window (TRL 1.16)
    w = offpolicy.loss_weights(mask, "dapo", max_completion_length=4, num_items_in_batch=torch.tensor(12),
                               accumulation=2, steps_per_generation=2)
    np.testing.assert_allclose(w.numpy(), mask / 12)


def test_the_step_summary_of_the_guided_rows():
    ratio = torch.tensor([[0.1, 0.2, 0.3], [1.0, 1.0, 1.0]])
    grad = torch.tensor([[0.0, 0.5, 0.25], [1.0, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    factors = offpolicy.loss_weights(mask, "bnpo", max_completion_length=3)
    tally = offpolicy.token_tally(ratio, grad, factors, mask, torch.tensor([1, 0]), torch.tensor([0.5, -1.0]))
    s = offpolicy.step_summary([tally])
    assert s["guided/ratio_median"] == pytest.approx(0.2) and s["guided/ratio_p10"] == pytest.approx(0.12)
    assert s["guided/ratio_p90"] == pytest.approx(0.28)
    assert s["guided/zero_weight_share"] == pytest.approx(1 / 3) and s["guided/weight_median"] == pytest.approx(0.5)
    assert s["guided/update_share"] == pytest.approx(0.75 / 2.75)  # (0.5 + 0.25) against 0.75 + 2 on-policy
    assert offpolicy.step_summary([]) == {}


# --- guidance in the prompt, Guide's filter ---------------------------------------------------------------------------


def test_guidance_goes_into_the_prompt_and_the_model_writes_the_whole_answer():
    template = "Hint: {guidance}\n\n{prompt}"
    assert guidance.guided_prompt("+5 +2 ?", "5", "prompt", template) == "Hint: 5\n\n+5 +2 ?"
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "What is {x}?"}]
    out = guidance.guided_prompt(chat, "x is 2", "prompt", template)
    assert out == [{"role": "system", "content": "s"}, {"role": "user", "content": "Hint: x is 2\n\nWhat is {x}?"}]
    assert chat[1]["content"] == "What is {x}?"  # the item's own prompt is left as it was
    assert guidance.guided_prompt("+5 ?", "", "prompt", template) == "+5 ?"
    assert guidance.guided_prompt("+5 ?", "5", "continuation", template) == "+5 ? 5"  # what the project did before


def test_guides_filter_finds_the_unmixed_groups():
    assert guidance.unmixed([[0, 0, 0], [0, 1, 0], [1, 1, 1], [1, 0, 0]]) == [0, 2]


# --- CoDaPO's percentile selection ------------------------------------------------------------------------------------


def reference_selection(weights: list[float], percentile: float, repeat_count: int) -> list[int]:
    """tmlr-group/CoDaPO codapo/ray_trainer.py, transcribed: the even step's uid2avg_weight and quantile threshold,
    then the odd step's reorganisation loop (one entity per question here)."""
    w = torch.tensor(weights, dtype=torch.float32)  # codapo_weights are the scores' dtype
    uid2weights = defaultdict(list)
    for entity_idx in range(len(w)):
        uid2weights[entity_idx].append(w[entity_idx].item())
    uid2avg_weight = {uid: ws[0] for uid, ws in uid2weights.items()}
    weight_threshold = torch.quantile(torch.tensor(list(uid2avg_weight.values())), percentile).item()
    selected_questions = [uid for uid, x in uid2avg_weight.items() if x >= weight_threshold]
    original_batch_size, selected, question_idx = len(weights), [], 0
    while len(selected) < original_batch_size:
        if question_idx < len(selected_questions):
            for _ in range(repeat_count):
                if len(selected) < original_batch_size:
                    selected.append(selected_questions[question_idx])
            question_idx += 1
        else:
            question_idx = 0
    return selected[:original_batch_size]


def test_the_percentile_rule_takes_the_first_quarter_in_batch_order_when_values_tie_at_the_floor():
    tied = [0.1, 0.1, 0.1, 0.62, 0.1, 0.1, 0.1, 0.1]  # six all-solved or all-failed groups, one learnable
    picks = refocus.percentile_picks(tied, 0.75)
    assert picks == list(range(8))  # the 75th percentile is the floor 0.1: every question qualifies
    assert refocus.refocused(picks, 4, 8) == [0, 0, 0, 0, 1, 1, 1, 1]  # so the first N/4, not the learnable one
    assert refocus.refocused(picks, 4, 8) == reference_selection(tied, 0.75, 4)
    spread = [0.1, 0.7, 0.3, 0.9, 0.1, 0.5, 0.2, 0.1]
    assert refocus.percentile_picks(spread, 0.75) == [1, 3]  # threshold 0.5 + 0.25 x 0.2 = 0.55, batch order
    assert refocus.refocused([1, 3], 4, 8) == [1, 1, 1, 1, 3, 3, 3, 3] == reference_selection(spread, 0.75, 4)
    assert refocus.refocused([5], 4, 10) == [5] * 10  # one pick cycles; a batch that does not tile is cut
    rng = np.random.default_rng(0)
    for n, repeats in [(8, 4), (12, 3), (16, 4), (6, 4)]:
        for _ in range(25):
            v = np.round(rng.choice([0.1, 0.1, 0.1, 0.35, 0.6, 0.85], n) + rng.uniform(0, 0.2, n) * (rng.random(n) < .3),
                         3).tolist()
            assert refocus.refocused(refocus.percentile_picks(v, 0.75), repeats, n) == reference_selection(v, 0.75,
                                                                                                          repeats)


# --- dynamic sampling: the filter and the cap -------------------------------------------------------------------------


def test_the_filter_reads_accuracy_like_dapo_or_the_total_reward():
    correct = [1, 1, 1, 1, 1, 0, 1, 1]
    advantages = [0.05, -0.05, 0.05, -0.05, 0.3, -0.9, 0.3, 0.3]  # group 0 all correct, its format rewards differ
    assert capping.mixed(correct, advantages, 4, "accuracy") == [False, True]
    assert capping.mixed(correct, advantages, 4, "reward") == [True, True]


def test_what_a_step_does_at_the_cap():
    rounds = [[True, False, False, True], [False, True, False, False]]  # 3 mixed groups where 4 are needed
    fill = capping.plan(rounds, 4, "fill")
    assert (fill.own, fill.filled, fill.short, fill.carried) == ([(0, 0), (0, 3), (1, 1)], [(0, 1)], 1, 0)
    error = capping.plan(rounds, 4, "error")
    assert error.short == 1 and error.filled == []  # the caller stops the run
    assert capping.plan(rounds, 4, "carry", carried=2).carried == 1 and capping.plan(rounds, 4, "carry", 2).filled == []
    assert capping.plan(rounds, 4, "carry", carried=0).filled == [(0, 1)]
    full = capping.plan([[True] * 3, [True, False, True]], 4, "carry")
    assert full.own == [(0, 0), (0, 1), (0, 2), (1, 0)] and full.surplus == [(1, 2)] and full.short == 0
    assert capping.keep_carried(["a"], ["b", "c"], 2) == ["b", "c"]  # the newest
    with pytest.raises(ValueError, match="allowed: fill, error, carry"):
        capping.plan(rounds, 4, "wait")


# --- TRL's vLLM importance-sampling correction ------------------------------------------------------------------------


def test_what_the_correction_zeroes_or_clips():
    old = torch.tensor([[0.5, 0.5, 0.5], [0.1, 0.1, 9.0], [-0.2, 0.0, 0.0]])
    sampling = torch.zeros(3, 3)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1]])
    # sequences: exp(1.5) = 4.5 > 3 (zeroed), exp(0.2), exp(-0.2); the padding's 9.0 does not count
    assert objective.corrected_shares(old, sampling, mask, "sequence_mask", None, 3.0) == (pytest.approx(1 / 3), 0.0)
    assert objective.corrected_shares(old, sampling, mask, "sequence_truncate", None, 3.0) == (0.0, pytest.approx(1 / 3))
    # tokens: exp(0.5) = 1.65 > 1.5 three times, exp(-0.2) = 0.82 < 0.9 once, of 8 completion tokens
    assert objective.corrected_shares(old, sampling, mask, "token_truncate", 0.9, 1.5) == (0.0, pytest.approx(4 / 8))
    assert objective.corrected_shares(old, sampling, mask, "token_mask", None, 1.5) == (pytest.approx(3 / 8), 0.0)
    # TRL issue 4772's arithmetic: a 0.012 mean gap over 100 tokens is exp(1.2) = 3.3, masked at 3
    long = torch.full((1, 100), 0.012)
    assert objective.corrected_shares(long, torch.zeros(1, 100), torch.ones(1, 100), "sequence_mask", None, 3.0)[0] == 1
    assert math.exp(1.2) > 3


def test_the_recorded_objective_names_the_correction_only_with_vllm():
    from trl import GRPOConfig

    args = GRPOConfig(output_dir="/tmp/unused", use_cpu=True, loss_type="dapo", beta=0.0, report_to="none")
    rec = objective.used(args)
    assert rec["loss_type"] == "dapo" and rec["epsilon"] == 0.2 and rec["delta"] is None
    assert rec["mask_truncated_completions"] is False and "vllm_importance_sampling_mode" not in rec
    args.use_vllm = True
    assert objective.used(args)["vllm_importance_sampling_mode"] == "sequence_mask"  # TRL 1.16's default
