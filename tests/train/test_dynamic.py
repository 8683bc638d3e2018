"""Dynamic sampling (online filtering): the selection math with known answers, and TRL's GRPOTrainer with it for
real on the tiny model, with a reward that makes some groups mixed and some not."""

import pandas as pd
import pytest
import torch

from grpo_budget.config.settings import Training
from grpo_budget.train import batches, capping, training
from grpo_budget.train.trainer import refill_prompts, round_prompts, trainer_class
from grpo_budget.train.fingerprint import trajectory_settings


def mixed_groups(advantages, num_generations):
    return capping.mixed(None, advantages, num_generations, "reward")


def test_a_group_is_mixed_when_any_advantage_is_nonzero():
    adv = [0, 0, 0, 0.5, -0.5, 0, 0, 0, 0.0, 1e-9, 0, 0]
    assert mixed_groups(adv, 3) == [False, True, False, True]
    assert mixed_groups(torch.zeros(6), 2) == [False, False, False]


def test_a_round_asks_for_enough_prompts_at_the_share_seen_so_far():
    assert round_prompts(shortfall=4, kept=0, tried=8, full=8) == 8  # nothing mixed yet: a full batch
    assert round_prompts(shortfall=4, kept=4, tried=8, full=8) == 8  # half kept: 8 prompts for 4 groups
    assert round_prompts(shortfall=1, kept=6, tried=8, full=8) == 2  # ceil(1 x 8 / 6)
    assert round_prompts(shortfall=3, kept=1, tried=8, full=8) == 8  # capped at a full batch
    assert round_prompts(shortfall=3, kept=7, tried=7, full=8) == 3  # never fewer than the shortfall


def test_refills_are_seeded_leave_out_the_steps_prompts_and_top_up_when_few_remain():
    a = refill_prompts(10, used={0, 1, 2}, n=4, seed=0, step=5, round_=1)
    assert a == refill_prompts(10, used={0, 1, 2}, n=4, seed=0, step=5, round_=1)
    assert len(set(a)) == 4 and not set(a) & {0, 1, 2}
    assert a != refill_prompts(10, used={0, 1, 2}, n=4, seed=0, step=6, round_=1)
    assert a != refill_prompts(10, used={0, 1, 2}, n=4, seed=1, step=5, round_=1)
    short = refill_prompts(4, used={0, 1, 2}, n=3, seed=0, step=0, round_=1)
    assert short[0] == 3 and len(short) == 3 and set(short) <= {0, 1, 2, 3}


def test_a_batch_takes_mixed_groups_in_order_then_fills_with_dropped_ones():
    rounds = [[True, False, False, True], [False, True, True]]
    assert capping.plan(rounds, 3, "fill").own == [(0, 0), (0, 3), (1, 1)]
    assert capping.plan(rounds, 4, "fill").own == [(0, 0), (0, 3), (1, 1), (1, 2)]
    # the cap was reached with two mixed groups for a batch of four: the first dropped ones fill it
    short = capping.plan([[True, False, False, True]], 4, "fill")
    assert sorted(short.own + short.filled) == [(0, 0), (0, 1), (0, 2), (0, 3)] and len(short.filled) == 2


def test_rows_of_several_rounds_are_repadded_prompts_left_completions_right():
    a = {"prompt_ids": torch.tensor([[5, 6], [7, 8]]), "prompt_mask": torch.ones(2, 2, dtype=torch.long),
         "completion_ids": torch.tensor([[1, 9, 9], [2, 3, 9]]), "completion_mask": torch.tensor([[1, 0, 0], [1, 1, 0]]),
         "advantages": torch.tensor([0.5, -0.5]), "num_items_in_batch": torch.tensor(3)}
    b = {"prompt_ids": torch.tensor([[4, 5, 6]]), "prompt_mask": torch.ones(1, 3, dtype=torch.long),
         "completion_ids": torch.tensor([[7]]), "completion_mask": torch.tensor([[1]]),
         "advantages": torch.tensor([1.0]), "num_items_in_batch": torch.tensor(1)}
    out = batches.take_rows([a, b], [(0, [1]), (1, [0])], pad_id=9)
    assert out["prompt_ids"].tolist() == [[9, 7, 8], [4, 5, 6]]
    assert out["prompt_mask"].tolist() == [[0, 1, 1], [1, 1, 1]]
    assert out["completion_ids"].tolist() == [[2, 3, 9], [7, 9, 9]]
    assert out["completion_mask"].tolist() == [[1, 1, 0], [1, 0, 0]]
    assert out["advantages"].tolist() == [-0.5, 1.0] and "num_items_in_batch" not in out
    with pytest.raises(ValueError, match="text-only.*pixel_values"):
        batches.take_rows([dict(a, pixel_values=torch.zeros(2, 1))], [(0, [0])], pad_id=9)


def test_dynamic_sampling_is_off_by_default_and_leaves_older_fingerprints_alone():
    t = Training.from_dict({})
    assert (t.dynamic_sampling, t.dynamic_max_rounds, t.dynamic_at_cap, t.dynamic_metric) == \
        (False, 9, "fill", "accuracy")  # verl's DAPO recipe: max_num_gen_batches 10 = the first batch + 9 rounds
    off = trajectory_settings(t)
    assert not {"dynamic_sampling", "dynamic_max_rounds", "dynamic_at_cap", "dynamic_metric"} & set(off)
    assert trajectory_settings(Training.from_dict({"dynamic_metric": "reward", "dynamic_at_cap": "error"})) == off
    # on, the defaults do not what runs with it did before (4 rounds, the total reward): their fingerprints differ
    on = trajectory_settings(Training.from_dict({"dynamic_sampling": True}))
    assert on["dynamic_sampling"] is True and on["dynamic_max_rounds"] == 9
    assert not {"dynamic_at_cap", "dynamic_metric"} & set(on)  # fill: what they did; the correct reward alone
    shaped = {"dynamic_sampling": True, "rewards": {"correct": 1.0, "format": 0.1}}
    assert trajectory_settings(Training.from_dict(shaped))["dynamic_metric"] == "accuracy"
    before = trajectory_settings(Training.from_dict({**shaped, "dynamic_max_rounds": 4, "dynamic_metric": "reward"}))
    assert before["dynamic_max_rounds"] == 4 and "dynamic_metric" not in before  # as runs before recorded it


# --- the trainer for real -------------------------------------------------------------------------------------------

G, PROMPTS = 4, 4


def odd_length_reward(completions, item, **kwargs):
    """Mixed for some groups, all-equal for others: prompts of even items are rewarded by the completion's length
    parity (random), odd items always get 0."""
    return [float(len(c) % 2) if i % 2 == 0 else 0.0 for c, i in zip(completions, item)]


def make_trainer(tmp_path, model_dir, dynamic_on: bool, max_rounds: int = 4, max_steps: int = 3, seen=None,
                 accumulation: int = 1, rewards=(odd_length_reward,), **settings):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from grpo_budget.generation.backends import load_tokenizer
    from grpo_budget.train.lora import lora_config

    t = Training.from_dict({"num_generations": G, "prompts_per_step": PROMPTS, "max_steps": max_steps,
                            "gradient_accumulation_steps": accumulation,
                            "dynamic_sampling": dynamic_on, "dynamic_max_rounds": max_rounds,
                            "save_steps": 1, "max_completion_length": 6, "learning_rate": 1e-3,
                            "lora": {"r": 2, "alpha": 4, "target_modules": ["q_proj", "v_proj"]}, **settings})
    args = training.grpo_config(t, tmp_path / "ck", seed=0, on_gpu=False)
    tok = load_tokenizer(str(model_dir))
    prompts = [f"{i} + 1 =" for i in range(12)]
    data = Dataset.from_dict({"prompt": prompts, "item": list(range(12))})
    base = trainer_class()

    class Recording(base):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if seen is not None and self.model.training:
                seen.append(out["advantages"].clone())
            return out

    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    return Recording(model=model, reward_funcs=list(rewards), args=args, train_dataset=data,
                     processing_class=tok, peft_config=lora_config(t.lora, ["q_proj", "v_proj"], None),
                     training=t)


def rollout_log(trainer) -> pd.DataFrame:
    log = pd.DataFrame(trainer.state.log_history)
    return log.dropna(subset=["rollouts/generated"]).set_index("step")


@pytest.mark.parametrize("accumulation", [1, 2])
def test_the_trainer_drops_all_equal_groups_and_refills_them_from_the_subset(tmp_path, tiny_model_dir, accumulation):
    """With gradient accumulation the filtered generation batch is what TRL splits into the micro-batches."""
    seen = []
    trainer = make_trainer(tmp_path, tiny_model_dir, dynamic_on=True, seen=seen, accumulation=accumulation)
    trainer.train()
    log = rollout_log(trainer)
    assert list(log.index) == [1, 2, 3]
    assert (log["rollouts/kept"] == G * PROMPTS).all()  # every step trains on a full batch
    assert (log["rollouts/generated"] == log["rollouts/kept"] + log["rollouts/discarded"]).all()
    assert (log["rollouts/discarded"] > 0).all()  # half the prompts are all-zero groups: some are always dropped
    assert (log["rollouts/rounds"] >= 2).all() and (log["rollouts/rounds"] <= 5).all()
    assert (log["rollouts/generated_tokens"] > 0).all()
    for adv, (_, row) in zip(seen, log.iterrows()):
        groups = mixed_groups(adv, G)
        assert len(groups) == PROMPTS
        assert sum(groups) == PROMPTS - row["rollouts/filled_groups"]  # kept groups all have mixed rewards
        assert row["rollouts/kept_mixed_share"] == sum(groups) / PROMPTS


def test_the_cap_bounds_the_rounds_and_fills_the_batch(tmp_path, tiny_model_dir):
    trainer = make_trainer(tmp_path, tiny_model_dir, dynamic_on=True, max_rounds=1, max_steps=2)
    trainer.train()
    log = rollout_log(trainer)
    assert (log["rollouts/rounds"] <= 2).all()
    assert (log["rollouts/generated"] <= 2 * G * PROMPTS).all()


def test_without_dynamic_sampling_every_rollout_is_kept_and_counted(tmp_path, tiny_model_dir):
    trainer = make_trainer(tmp_path, tiny_model_dir, dynamic_on=False, max_steps=2)
    trainer.train()
    log = rollout_log(trainer)
    assert (log["rollouts/generated"] == G * PROMPTS).all() and (log["rollouts/discarded"] == 0).all()
    assert (log["rollouts/rounds"] == 1).all()
    assert ((log["rollouts/kept_mixed_share"] - (1 - log["frac_reward_zero_std"])).abs() < 1e-9).all()


def test_a_step_killed_midway_redraws_the_same_refills_on_resume(tmp_path, tiny_model_dir):
    """Checkpoints hold whole steps: a job killed during step 3 resumes from checkpoint 2 and redoes step 3, which
    draws its refill prompts from (seed, step, round) and so gets the rollouts an uninterrupted run got."""
    straight = make_trainer(tmp_path / "a", tiny_model_dir, dynamic_on=True, max_steps=3)
    straight.train()
    first = make_trainer(tmp_path / "b", tiny_model_dir, dynamic_on=True, max_steps=2)
    first.train()
    resumed = make_trainer(tmp_path / "b", tiny_model_dir, dynamic_on=True, max_steps=3)
    resumed.train(resume_from_checkpoint=str(tmp_path / "b" / "ck" / "checkpoint-2"))
    cols = ["rollouts/generated", "rollouts/rounds", "rollouts/filled_groups", "rollouts/generated_tokens"]
    pd.testing.assert_series_equal(rollout_log(straight).loc[3, cols], rollout_log(resumed).loc[3, cols])


# --- the filter's metric and what a step does at the cap, on the real trainer ----------------------------------------


def scripted(plan: list[list[bool]]):
    """A reward named ``correct`` that scores each generation round (one call) by ``plan``: call i's group j is mixed
    (one right rollout of G) if ``plan[i][j]``, else all wrong; calls past the plan are all wrong."""
    calls = []

    def correct(completions, **kwargs):
        groups = plan[len(calls)] if len(calls) < len(plan) else [False] * (len(completions) // G)
        calls.append(len(completions))
        return [1.0 if groups[row // G] and row % G == 0 else 0.0 for row in range(len(completions))]

    return correct


def two_steps(tmp_path, model_dir, at_cap: str):
    """Step 1: half its groups mixed, then a refill round of 4 prompts all mixed (2 beyond its need); step 2: nothing
    mixed in either round (1 extra round)."""
    reward = scripted([[True, True, False, False], [True] * 4])
    trainer = make_trainer(tmp_path, model_dir, dynamic_on=True, max_rounds=1, max_steps=2, rewards=(reward,),
                           dynamic_at_cap=at_cap)
    return trainer


def test_at_the_cap_fill_completes_the_batch_with_dropped_groups(tmp_path, tiny_model_dir):
    trainer = two_steps(tmp_path, tiny_model_dir, "fill")
    trainer.train()
    log = rollout_log(trainer)
    assert list(log["rollouts/rounds"]) == [2, 2] and list(log["rollouts/filled_groups"]) == [0, 4]
    assert list(log["rollouts/kept_mixed_share"]) == [1.0, 0.0]
    assert "rollouts/carried_groups" not in log


def test_at_the_cap_error_stops_the_run_in_one_line_like_verls_recipe(tmp_path, tiny_model_dir):
    from grpo_budget.errors import UserError

    trainer = two_steps(tmp_path, tiny_model_dir, "error")
    with pytest.raises(UserError) as e:
        trainer.train()
    assert "\n" not in str(e.value) and "found 0 of the 4 groups step 2 needs" in str(e.value)
    assert "dynamic_max_rounds: 1" in str(e.value) and trainer.state.global_step == 1  # step 1 had enough


def test_at_the_cap_carry_takes_the_groups_an_earlier_step_found_beyond_its_need(tmp_path, tiny_model_dir):
    trainer = two_steps(tmp_path, tiny_model_dir, "carry")
    trainer.train()
    log = rollout_log(trainer)
    assert list(log["rollouts/carried_groups"]) == [0, 2] and list(log["rollouts/filled_groups"]) == [0, 2]
    assert list(log["rollouts/kept_mixed_share"]) == [1.0, 0.5]  # the 2 carried groups are mixed
    assert list(log["rollouts/generated"]) == [32, 32] and list(log["rollouts/kept"]) == [16, 16]
    assert list(log["rollouts/discarded"]) == [16, 24]  # step 2 trains 8 rows that step 1 generated


def format_like(completions, **kwargs):
    """A second reward that differs within every group."""
    return [float(i % 2) for i in range(len(completions))]


def always_right(completions, **kwargs):
    return [1.0] * len(completions)


always_right.__name__ = "correct"


@pytest.mark.parametrize("metric, rounds, filled", [("accuracy", 2, PROMPTS), ("reward", 1, 0)])
def test_the_filter_reads_accuracy_like_dapo_or_the_total_reward(tmp_path, tiny_model_dir, metric, rounds, filled):
    """Every rollout is right, but a format-like reward differs within each group: DAPO's accuracy filter drops every
    group (and fills at the cap), the total reward keeps them all in one round."""
    trainer = make_trainer(tmp_path, tiny_model_dir, dynamic_on=True, max_rounds=1, max_steps=1,
                           rewards=(always_right, format_like), dynamic_metric=metric)
    trainer.train()
    log = rollout_log(trainer)
    assert list(log["rollouts/rounds"]) == [rounds] and list(log["rollouts/filled_groups"]) == [filled]
