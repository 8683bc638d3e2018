"""Training methods (training.method): CoDaPO's values, weights and draws, and guided rollouts' guidance and
importance ratio, with known answers; then the trainer for real on the tiny model."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from grpo_budget.cluster import work
from grpo_budget.cluster.jobs import training_job
from grpo_budget.config.settings import Training
from grpo_budget.errors import UserError
from grpo_budget.experiment import config as experiment_config
from grpo_budget.prepare import framearith
from grpo_budget.train import training
from grpo_budget.train.codapo import (batch_problem, codapo_values, resample, resample_count, resample_probabilities,
                                     selected)
from grpo_budget.train.guided import guidance, guided_groups, guided_prompt
from grpo_budget.train.fingerprint import trajectory_settings
from grpo_budget.train.methods import METHODS, Method
from grpo_budget.train.refocus import percentile_picks, refocused
from grpo_budget.train.schedule import schedule
from grpo_budget.train.trainer import trainer_class

ROOT = Path(__file__).resolve().parents[2]

# --- the math, by hand ------------------------------------------------------------------------------------------------


def test_codapo_values_on_hand_made_groups():
    """v = c (1 - 4 (d - 1/2)^2) + 0.1 with d = 1 - accuracy and c = exp(mean log-prob)."""
    correct = [[1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0]]
    logps = [[math.log(0.5)] * 4] * 4
    v = codapo_values(correct, logps, offset=0.1)
    np.testing.assert_allclose(v, [0.1, 0.1, 0.5 * 1.0 + 0.1, 0.5 * 0.75 + 0.1])
    # confidence: the mean of the rollouts' mean log-probs, then exp (not the mean of probabilities)
    v = codapo_values([[1, 0]], [[math.log(0.25), math.log(1.0)]], offset=0.0)
    np.testing.assert_allclose(v, [0.5])
    # bounded in [offset, 1 + offset]
    rng = np.random.default_rng(0)
    v = codapo_values(rng.integers(0, 2, (200, 8)), -rng.exponential(2, (200, 8)), offset=0.1)
    assert (v >= 0.1).all() and (v <= 1.1).all()


def test_the_top_rule_takes_the_highest_values_and_breaks_ties_by_a_seeded_order():
    v = [0.1, 0.9, 0.5, 0.9, 0.2]
    assert resample(v, 1, "top", seed=0, step=3) in ([1], [3])
    assert resample(v, 3, "top", seed=0, step=3) == [1, 2, 3]
    ties = {tuple(resample(v, 1, "top", seed=s, step=1)) for s in range(20)}
    assert ties == {(1,), (3,)}  # either tied question, by the seed
    assert resample(v, 2, "top", 5, 7) == resample(v, 2, "top", 5, 7)
    assert resample_count(8, 0.25) == 2 and resample_count(3, 0.1) == 1


def test_the_value_rule_draws_with_the_stated_probabilities():
    v = [0.1, 0.2, 0.3, 0.4]
    np.testing.assert_allclose(resample_probabilities(v), [0.1, 0.2, 0.3, 0.4])
    picks = np.concatenate([resample(v, 50, "value", seed=0, step=s) for s in range(400)])
    counts = np.bincount(picks, minlength=4)
    expected = np.array([0.1, 0.2, 0.3, 0.4]) * len(picks)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 16.3  # chi-square, 3 degrees of freedom, p = 0.001
    assert resample(v, 5, "value", 1, 2) == resample(v, 5, "value", 1, 2)  # seeded: same draw
    with pytest.raises(ValueError, match="allowed: percentile, top, value"):
        resample(v, 1, "best", 0, 0)


def test_guidance_is_a_prefix_of_the_solution_that_leaves_the_answer():
    assert guidance("2 2 1 6 9 3 = 3", 0.5) == "2 2 1 6"
    assert guidance("2 2 1 6 9 3 = 3", 1.0) == "2 2 1 6 9 3"  # never the last two words
    assert guidance("5 = 5", 0.9) == "5"
    assert guidance("5 = 5", 0.0) == ""
    assert guided_prompt("+5 ?", "5", None, None) == "+5 ? 5"
    assert guided_prompt("+5 ?", "", None, None) == "+5 ?"


def test_guidance_goes_where_configured():
    correct = [[0, 0, 0], [0, 1, 0], [0, 0, 0], [1, 1, 1]]
    assert guided_groups(correct, "failed") == [0, 2]
    assert guided_groups(correct, "always") == [0, 1, 2, 3]


def codapo_settings(prompts: int, generations: int, share: float, repeats: int, updates: int = 1) -> Training:
    return Training.from_dict({"method": "codapo", "prompts_per_step": prompts, "num_generations": generations,
                               "codapo_resample_share": share, "codapo_repeats": repeats, "codapo_updates": updates})


def test_codapo_batches_must_split_into_the_micro_batches():
    assert batch_problem(codapo_settings(8, 8, 0.25, 4), 1) is None
    assert batch_problem(codapo_settings(8, 4, 0.25, 4), 2) is None
    setting, why = batch_problem(codapo_settings(6, 3, 0.2, 1), 2)  # 1 question x 1 x 3 rollouts over 2
    assert setting == "codapo_repeats" and "CoDaPO adds 3 rollouts" in why and "codapo_repeats" in why
    assert batch_problem(codapo_settings(6, 3, 0.2, 1, updates=2), 2) is None  # its second update is a whole batch


def test_each_method_says_what_a_step_of_it_adds():
    """Rows trained and rollouts generated per step, and a micro-batch, as the memory and cost plans count them."""
    t = codapo_settings(8, 4, 0.25, 4)  # one update: 2 questions x 4 repeats x 4 rollouts more
    assert METHODS["codapo"].rows_per_step(t) == 32 + 32 and METHODS["codapo"].generations_per_step(t) == 64
    assert METHODS["codapo"].micro_batch(t) == 64 and METHODS["codapo"].updates_per_batch(t) == 1
    two = codapo_settings(8, 4, 0.25, 4, updates=2)  # two updates, each a step of 8 prompts x 4
    assert METHODS["codapo"].rows_per_step(two) == 32 == METHODS["codapo"].generations_per_step(two)
    assert METHODS["codapo"].micro_batch(two) == 32 and METHODS["codapo"].updates_per_batch(two) == 2
    plain = Training.from_dict({"prompts_per_step": 8, "num_generations": 4, "gradient_accumulation_steps": 2})
    assert METHODS["grpo"].rows_per_step(plain) == 32
    assert METHODS["grpo"].micro_batch(plain) == 16 == plain.per_device_batch
    always = Training.from_dict({"method": "guided", "prompts_per_step": 8, "num_generations": 4,
                                 "guidance_when": "always"})
    assert METHODS["guided"].rows_per_step(always) == 32 and METHODS["guided"].generations_per_step(always) == 64
    assert METHODS["guided"].generations_per_step(Training.from_dict({"method": "guided"})) == 32 * 8


def test_method_settings_reach_the_fingerprint_only_for_their_method():
    assert trajectory_settings(Training.from_dict({})) == trajectory_settings(Training.from_dict({"method": "grpo",
                                                                                                   "guidance_fraction": 0.3}))
    codapo = trajectory_settings(Training.from_dict({"method": "codapo"}))
    assert codapo["method"] == "codapo" and codapo["codapo_repeats"] == 4 and "guidance_fraction" not in codapo
    guided = trajectory_settings(Training.from_dict({"method": "guided", "guidance_fraction": 0.3}))
    assert guided["guidance_fraction"] == 0.3 and "codapo_repeats" not in guided
    # the default rewards (correctness alone) are what runs did before training.rewards existed
    assert "rewards" not in trajectory_settings(Training.from_dict({"rewards": {"correct": 1}}))
    assert trajectory_settings(Training.from_dict({"rewards": {"correct": 1, "format": 0.1}}))["rewards"]


def test_a_dataset_without_solutions_is_refused_in_one_line_naming_it():
    subset = pd.DataFrame({"prompt": ["q"], "answer": ["1"], "answer_type": ["number"]})
    t = Training.from_dict({"method": "guided"})
    with pytest.raises(UserError, match=r"^training.method is guided.*1 of 1 items of s.parquet \(gsm8k\)") as e:
        training.solution_column(subset, t, {"benchmark": "gsm8k"}, "s.parquet")
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="1 of 2 items"):
        training.solution_column(subset.assign(solution=["x"]).pipe(lambda d: pd.concat([d, d.assign(solution="")])),
                                 t, {"generator": "frame_arithmetic"}, "s.parquet")
    assert training.solution_column(subset, Training.from_dict({"method": "codapo"}), {}, "s") == []


# --- the trainer for real ---------------------------------------------------------------------------------------------

G, PROMPTS = 4, 4
ITEMS = framearith.generate(12, 0, width=4, min_ops=1, max_ops=4)


def correct(completions, item, **kwargs):
    """Odd items always fail (their groups are all-failed); even items pass by the completion's length parity."""
    return [float(len(c) % 2) if i % 2 == 0 else 0.0 for c, i in zip(completions, item)]


def make_trainer(tmp_path, model_dir, method: str, max_steps: int = 2, record=None, filtering: bool = False,
                 reward=correct, **settings):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from grpo_budget.generation.backends import load_tokenizer
    from grpo_budget.train.lora import lora_config

    t = Training.from_dict({"num_generations": G, "prompts_per_step": PROMPTS, "max_steps": max_steps,
                            "save_steps": 1, "max_completion_length": settings.pop("length", 6),
                            "learning_rate": 1e-2, "method": method, **settings,
                            "dynamic_sampling": filtering, "dynamic_max_rounds": 2,
                            "lora": {"r": 2, "alpha": 4, "target_modules": ["q_proj", "v_proj"]}})
    args = training.grpo_config(t, tmp_path / "ck", seed=0, on_gpu=False)
    data = Dataset.from_dict({"prompt": list(ITEMS["prompt"]), "item": list(range(len(ITEMS))),
                              "solution": list(ITEMS["solution"])})
    base = trainer_class()

    class Recording(base):
        def _scored(self, inputs):
            out = super()._scored(inputs)
            if record is not None:  # with the rollouts' mean log-probs under the weights that generated them
                record.append(("scored", [x["prompt"] for x in inputs], out["correct"].clone(), dict(out),
                               _mean_logps(self, out), _adapter(self)))
            return out

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if record is not None and self.model.training:
                record.append(("batch", [x["prompt"] for x in inputs], None, out, None))
            return out

    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    return Recording(model=model, reward_funcs=reward, args=args, train_dataset=data,
                     processing_class=load_tokenizer(str(model_dir)),
                     peft_config=lora_config(t.lora, ["q_proj", "v_proj"], None), training=t)


def step_log(trainer) -> pd.DataFrame:
    return pd.DataFrame(trainer.state.log_history).dropna(subset=["rollouts/generated"]).set_index("step")


TEMPLATE = Training.from_dict({}).method_settings["guidance_template"]


def in_prompt(prompt: str, solution: str) -> str:
    """The guided prompt of the defaults: the guidance (half the solution) put into the prompt by the template."""
    return TEMPLATE.replace("{guidance}", guidance(solution, 0.5)).replace("{prompt}", prompt)


def test_guided_rollouts_go_to_failed_groups_with_the_solutions_prefix_in_the_prompt(tmp_path, tiny_model_dir):
    record = []
    trainer = make_trainer(tmp_path, tiny_model_dir, "guided", max_steps=2, record=record)
    trainer.train()
    steps = [i for i, r in enumerate(record) if r[0] == "batch"]
    start = 0
    by_prompt = dict(zip(ITEMS["prompt"], ITEMS["solution"]))
    for end in steps:
        calls = record[start:end]
        first_prompts, first_correct = calls[0][1], calls[0][2].view(-1, G)
        failed = [k for k in range(PROMPTS) if first_correct[k].max() == 0]
        guided = calls[1][1] if len(calls) > 1 else []
        want = [in_prompt(first_prompts[k * G], by_prompt[first_prompts[k * G]]) for k in failed for _ in range(G)]
        assert guided == want  # exactly the failed groups, each with its own solution's prefix in its prompt
        start = end + 1
    log = step_log(trainer)
    assert (log["guided/groups"] > 0).all()  # odd items always fail: every step guides some group
    # ... and fail with guidance too, so Guide's filter drops every guided group: the step trains on its own groups
    assert (log["guided/dropped"] == log["guided/groups"]).all()
    assert (log["rollouts/generated"] == G * PROMPTS + G * log["guided/groups"]).all()
    assert (log["rollouts/kept"] == G * PROMPTS).all()


def hinted(completions, item, prompts, **kwargs):
    """With guidance in the prompt, items 1 (mod 4) pass by the completion's length parity and items 3 (mod 4)
    always pass; without it, as :func:`correct` (odd items always fail)."""
    out = []
    for c, i, p in zip(completions, item, prompts):
        hint = "Hint:" in (p if isinstance(p, str) else str(p))
        out.append(float(len(c) % 2) if i % 2 == 0 or (hint and i % 4 == 1) else float(hint and i % 4 == 3))
    return out


def test_guides_filter_drops_the_guided_groups_that_come_back_unmixed(tmp_path, tiny_model_dir):
    """Guided groups of items 3 (mod 4) all pass: dropped, their own all-failed group stays in the batch; guided
    groups of items 1 (mod 4) are mixed unless their lengths happen to agree: kept, in place of their group."""
    record = []
    trainer = make_trainer(tmp_path, tiny_model_dir, "guided", max_steps=3, record=record, reward=hinted)
    trainer.train()
    guided_rows = kept_guided = 0
    for kind, _, _, out, *_ in record:
        if kind != "batch":
            continue
        marks = out["guided"].view(-1, G)
        assert set(marks.sum(1).tolist()) <= {0.0, float(G)}  # whole groups
        adv = out["advantages"].view(-1, G)
        for g in range(len(marks)):
            if marks[g, 0]:  # a guided group in the batch: mixed (Guide keeps no other)
                kept_guided += 1
                assert bool((adv[g] != 0).any())
        guided_rows += int(marks.sum())
    log = step_log(trainer)
    assert (log["guided/groups"] > 0).all() and log["guided/dropped"].sum() > 0
    assert kept_guided == int((log["guided/groups"] - log["guided/dropped"]).sum()) > 0
    assert guided_rows == G * kept_guided
    assert (log["rollouts/kept"] == G * PROMPTS).all()
    # a step whose guided groups were all dropped trains no guided row: it logs no ratio
    assert log["guided/ratio_median"].notna().tolist() == (log["guided/groups"] > log["guided/dropped"]).tolist()


def test_the_importance_ratio_of_a_guided_rollout_by_hand(tmp_path, tiny_model_dir):
    """A two-token completion c generated from the prompt with guidance g in it is trained on the prompt q without
    it: its old log-probs are those of c after q with g, and the ratio the loss starts from is
    exp(log pi(c | q) - log pi(c | q, g)), computed here from the model's logits by hand."""
    import torch

    record = []
    trainer = make_trainer(tmp_path, tiny_model_dir, "guided", max_steps=1, record=record, length=2,
                           guidance_filter=False)  # its guided groups all fail: kept, to be looked at
    model, tok = trainer.model, trainer.processing_class

    def by_hand(prompt: str, completion: list[int]) -> list[float]:
        ids = tok(text=prompt)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([ids + completion])).logits[0].float()
        logp = torch.log_softmax(logits, -1)
        return [float(logp[len(ids) - 1 + t, completion[t]]) for t in range(len(completion))]

    checked = []

    class Check(type(trainer)):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            solutions = dict(zip(ITEMS["prompt"], ITEMS["solution"]))
            guided_calls = [r for r in record if r[0] == "scored"][1:]
            guided_prompts = set(guided_calls[0][1]) if guided_calls else set()
            by_ids = {tuple(tok(text=p)["input_ids"]): p for p in ITEMS["prompt"]}
            for row in range(len(out["advantages"])):
                n_prompt = int(out["prompt_mask"][row].sum())
                prompt = by_ids[tuple(out["prompt_ids"][row, -n_prompt:].tolist())]
                c = out["completion_ids"][row][out["completion_mask"][row].bool()].tolist()
                guided = in_prompt(prompt, solutions[prompt])
                if guided not in guided_prompts or len(c) != 2:
                    continue
                old = out["old_per_token_logps"][row, :2].tolist()
                np.testing.assert_allclose(old, by_hand(guided, c), atol=1e-5)  # pi_old(c | q, g)
                now = self._get_per_token_logps_and_entropies(
                    self.model, torch.cat([out["prompt_ids"][row:row + 1], out["completion_ids"][row:row + 1]], 1),
                    torch.cat([out["prompt_mask"][row:row + 1], out["completion_mask"][row:row + 1]], 1), 2)[0]
                ratio = math.exp(sum(by_hand(prompt, c)) - sum(by_hand(guided, c)))
                assert math.exp(float(now[0, :2].sum()) - sum(old)) == pytest.approx(ratio, rel=1e-4)
                checked.append(ratio)
            return out

    trainer.__class__ = Check
    trainer.train()
    assert checked and any(abs(r - 1) > 1e-3 for r in checked)  # the guidance changed the probabilities


def test_guides_shaping_of_guided_rows_at_ratio_one_halves_their_loss_and_quarters_their_gradient(
        tmp_path, tiny_model_dir):
    """At r = 1 (old log-probs set to the policy's own) gamma, the 0.9 quantile of the guided ratios, is 1: a guided
    token's term -A r / (r + gamma) is half of TRL's -A r, and its gradient gamma r / (r + gamma)^2 a quarter of
    TRL's. So the loss of a micro-batch is TRL's on its other rows plus half TRL's on its guided rows, and likewise
    its gradient with a quarter: checked on a real micro-batch of a guided run, against TRL's own loss."""
    import torch
    from trl import GRPOTrainer

    from grpo_budget.train.batches import completion_logps

    checked = []
    trainer = make_trainer(tmp_path, tiny_model_dir, "guided", max_steps=3, reward=hinted)

    class Check(type(trainer)):
        def _compute_loss(self, model, inputs):
            guided = inputs.get("guided")
            signal = guided is not None and bool((inputs["advantages"] * guided).abs().sum() > 0)
            if not checked and signal and model.training:  # a micro-batch whose guided rows carry signal
                params = [p for p in model.parameters() if p.requires_grad]
                now = completion_logps(self, inputs)
                x = dict(inputs, old_per_token_logps=torch.where(guided.bool().unsqueeze(1), now,
                                                                 inputs["old_per_token_logps"]))
                adv = x["advantages"]

                def value_and_grad(fn, batch):
                    loss = fn(model, batch)
                    return float(loss), torch.autograd.grad(loss, params)

                mine = value_and_grad(super()._compute_loss, x)
                others = value_and_grad(lambda m, b: GRPOTrainer._compute_loss(self, m, b),
                                        dict(x, advantages=adv * (1 - guided)))
                theirs = value_and_grad(lambda m, b: GRPOTrainer._compute_loss(self, m, b),
                                        dict(x, advantages=adv * guided))
                assert mine[0] == pytest.approx(others[0] + 0.5 * theirs[0], rel=1e-4, abs=1e-7)
                for a, b, c in zip(mine[1], others[1], theirs[1]):
                    torch.testing.assert_close(a, b + 0.25 * c, rtol=1e-3, atol=1e-7)
                checked.append(True)
            return super()._compute_loss(model, inputs)

    trainer.__class__ = Check
    trainer.train()
    assert checked


@pytest.mark.parametrize("form", ["shape", "ppo"])
def test_each_step_logs_the_guided_rows_ratios_weights_and_share_of_the_update(tmp_path, tiny_model_dir, form):
    trainer = make_trainer(tmp_path, tiny_model_dir, "guided", max_steps=2, guidance_filter=False, reward=hinted,
                           guidance_objective=form)
    trainer.train()
    log = step_log(trainer)
    for name in ("ratio_median", "ratio_p10", "ratio_p90", "update_share"):  # every step trains guided rows
        assert log[f"guided/{name}"].notna().all(), name
    for name in ("weight_median", "zero_weight_share"):  # a step whose guided rows all tie has no weight to log
        assert log[f"guided/{name}"].notna().any(), name
    assert (log["guided/ratio_p10"] <= log["guided/ratio_median"]).all()
    assert (log["guided/ratio_median"] <= log["guided/ratio_p90"]).all()
    assert log["guided/update_share"].between(0, 1).all()
    if form == "shape":  # Guide's shaping never zeroes a token: gamma r / (r + gamma)^2 > 0
        assert (log["guided/zero_weight_share"].dropna() == 0).all()


def test_codapo_single_update_scales_each_group_by_its_value_and_adds_the_top_groups_rollouts(tmp_path,
                                                                                              tiny_model_dir):
    record = []
    trainer = make_trainer(tmp_path, tiny_model_dir, "codapo", max_steps=2, record=record,
                           codapo_resample_share=0.5, codapo_repeats=1, codapo_updates=1, codapo_resample="top")
    trainer.train()
    log = step_log(trainer)
    extra = resample_count(PROMPTS, 0.5) * 1 * G
    assert (log["codapo/extra_rollouts"] == extra).all()
    assert (log["rollouts/generated"] == G * PROMPTS + extra).all() and (log["rollouts/kept"] == G * PROMPTS + extra).all()
    scored = [r for r in record if r[0] == "scored"]
    batches = [r for r in record if r[0] == "batch"]
    first, top_up, batch = scored[0][3], scored[1][3], batches[0][3]
    values = codapo_values(first["correct"].view(-1, G).numpy(), scored[0][4], 0.1)
    picks = resample(values, 2, "top", 0, 0)
    assert sorted(set(top_up["item"].tolist())) == sorted(int(first["item"][p * G]) for p in picks)
    assert len(batch["advantages"]) == G * PROMPTS + extra
    # the step's own groups come first, scaled by their values (a row of zero advantage stays zero)
    scaled = batch["advantages"][: G * PROMPTS].view(-1, G)
    raw = first["advantages"].view(-1, G)
    for k in range(PROMPTS):
        if raw[k].abs().sum() > 0:
            np.testing.assert_allclose((scaled[k] / raw[k])[raw[k] != 0].numpy(), values[k], rtol=1e-4)


def test_codapos_second_update_trains_on_rollouts_the_updated_policy_generated(tmp_path, tiny_model_dir):
    """The reference's loop (tmlr-group/CoDaPO codapo/ray_trainer.py): step 1 updates on the batch and selects by
    the percentile rule; step 2 generates the selected questions, each 4 times in turn to the batch's size, with the
    weights after step 1's update (they differ from those that generated the batch), and updates on them; each
    update is a step of the log with the batch's size. Step 3 takes the sampler's next batch."""
    record = []
    trainer = make_trainer(tmp_path, tiny_model_dir, "codapo", max_steps=3, record=record)
    trainer.train()
    scored = [r for r in record if r[0] == "scored"]
    assert len(scored) == 3  # one generation per step: nothing is generated beside a step's batch
    first, second, third = scored
    assert not np.allclose(first[5].numpy(), second[5].numpy())  # the policy was updated between the generations
    values = codapo_values(first[2].view(-1, G).numpy(), first[4], 0.1)
    items = [int(i) for i in first[3]["item"].view(-1, G)[:, 0]]
    want = [items[p] for p in refocused(percentile_picks(values, 0.75), 4, PROMPTS)]
    assert [int(i) for i in second[3]["item"].view(-1, G)[:, 0]] == want
    assert second[1] == [ITEMS["prompt"][i] for i in want for _ in range(G)]
    # its rollouts' log-probs under the policy that generated them are the updated policy's, not the batch's
    before = make_trainer(tmp_path / "fresh", tiny_model_dir, "codapo", max_steps=1)
    assert not np.allclose(_mean_logps(before, second[3]), second[4], atol=1e-4)
    assert not set(int(i) for i in third[3]["item"]) & set(items)  # the sampler's next batch
    log = step_log(trainer)
    assert log.index.tolist() == [1, 2, 3] and log["codapo/update"].tolist() == [1, 2, 1]
    assert (log["rollouts/generated"] == G * PROMPTS).all() and (log["rollouts/kept"] == G * PROMPTS).all()
    assert (log["codapo/extra_rollouts"] == 0).all()


def always_wrong(completions, item, **kwargs):
    return [0.0 for _ in completions]


def test_the_second_update_takes_the_first_quarter_in_batch_order_when_every_value_ties_at_the_floor(
        tmp_path, tiny_model_dir):
    """Every group fails, so every value is the floor 0.1: the reference's percentile rule keeps every question and
    its second batch is the batch's first question 4 times (N/4 = 1 of 4), where the paper's top-K takes a seeded
    one of the tied questions."""
    for rule, seed_sensitive in (("percentile", False), ("top", True)):
        record = []
        trainer = make_trainer(tmp_path / rule, tiny_model_dir, "codapo", max_steps=2, record=record,
                               reward=always_wrong, codapo_resample=rule)
        trainer.train()
        first, second = [r for r in record if r[0] == "scored"]
        items = [int(i) for i in first[3]["item"].view(-1, G)[:, 0]]
        again = [int(i) for i in second[3]["item"].view(-1, G)[:, 0]]
        if rule == "percentile":
            assert again == [items[0]] * PROMPTS
        else:
            assert len(set(again)) == 1 and again == [items[resample([0.1] * PROMPTS, 1, "top", 0, 0)[0]]] * 4


def test_the_percentile_rule_keeps_every_tied_question_in_batch_order_and_top_k_keeps_k():
    tied = [0.1] * 8
    assert selected(tied, 0.25, "percentile", 0, 0) == list(range(8))
    assert refocused(selected(tied, 0.25, "percentile", 0, 0), 4, 8) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert len(selected(tied, 0.25, "top", 0, 0)) == 2  # K = 2 of 8, ties in a seeded order
    spread = [0.1, 0.7, 0.3, 0.5, 0.1, 0.2, 0.1, 0.1]  # 75th percentile: 0.35 (linear): 0.7 and 0.5, batch order
    assert selected(spread, 0.25, "percentile", 0, 0) == [1, 3] == selected(spread, 0.25, "top", 0, 0)


def test_each_update_is_a_step_of_the_schedule_and_of_the_cost_plan():
    """With ``epochs``, a pass over the subset is its batches x 2 steps for CoDaPO's two updates; the cost plan
    counts every step at the batch's size, so a codapo arm generates what a grpo arm of the same steps does."""
    grpo = Training.from_dict({"prompts_per_step": 8, "num_generations": 8, "epochs": 2})
    two = Training.from_dict({"method": "codapo", "prompts_per_step": 8, "num_generations": 8, "epochs": 2})
    one = Training.from_dict({"method": "codapo", "prompts_per_step": 8, "num_generations": 8, "epochs": 2,
                              "codapo_updates": 1})
    assert schedule(100, grpo)[0] == 24 and schedule(100, two)[0] == 48 and schedule(100, one)[0] == 24
    cfg = yaml.safe_load((ROOT / "tests/configs/tiny.yaml").read_text())
    cfg["sweep"] = {"training.method": ["grpo", "codapo"]}
    trains = {j.name: j for j in work.jobs(experiment_config.validate(cfg)) if j.rule == "train"}
    plain, codapo = trains["tiny_framearith_hard_b0.2_s0_v-grpo"], trains["tiny_framearith_hard_b0.2_s0_v-codapo"]
    assert codapo.steps == plain.steps and codapo.sequences == plain.sequences
    assert codapo.train_tokens == plain.train_tokens
    cfg["training"]["codapo_updates"] = 1  # the single update: its resampled groups on top of each step
    single = {j.name: j for j in work.jobs(experiment_config.validate(cfg)) if j.rule == "train"}
    assert single["tiny_framearith_hard_b0.2_s0_v-codapo"].sequences == 2 * plain.sequences


def _adapter(trainer):
    """The policy's trainable weights now (the LoRA adapter), a copy."""
    import torch

    return torch.cat([p.detach().flatten().clone() for p in trainer.model.parameters() if p.requires_grad])


def _mean_logps(trainer, batch):
    from grpo_budget.train.batches import completion_logps, mean_logps

    return mean_logps(completion_logps(trainer, batch), batch["completion_mask"]).view(-1, G).numpy()


@pytest.mark.parametrize(("method", "updates"), [("guided", 2), ("codapo", 1), ("codapo", 2)])
def test_each_method_composes_with_dynamic_sampling(tmp_path, tiny_model_dir, method, updates):
    """Dynamic sampling fills the step's batch with mixed groups (guided ones count), then CoDaPO's single update
    adds its own; its second update is a step of the batch's size, filled as any step."""
    trainer = make_trainer(tmp_path, tiny_model_dir, method, max_steps=2, filtering=True, codapo_resample_share=0.5,
                           codapo_repeats=1, codapo_updates=updates)
    trainer.train()
    log = step_log(trainer)
    extra = resample_count(PROMPTS, 0.5) * G if (method, updates) == ("codapo", 1) else 0
    assert (log["rollouts/kept"] == G * PROMPTS + extra).all()
    assert (log["rollouts/generated"] == log["rollouts/kept"] + log["rollouts/discarded"]).all()
    assert (log["rollouts/rounds"] <= 3).all()


@pytest.mark.parametrize(("method", "kill"), [("guided", 2), ("codapo", 2), ("codapo", 1)])
def test_a_step_redone_after_a_kill_redraws_the_same_guidance_and_resamples(tmp_path, tiny_model_dir, method, kill):
    """Killed after step 2 (with CoDaPO's two updates, a batch's second) or after step 1 (between a batch's two
    updates: the selection travels in the checkpoint)."""
    straight = make_trainer(tmp_path / "a", tiny_model_dir, method, max_steps=3)
    straight.train()
    first = make_trainer(tmp_path / "b", tiny_model_dir, method, max_steps=kill)
    first.train()
    resumed = make_trainer(tmp_path / "b", tiny_model_dir, method, max_steps=3)
    resumed.train(resume_from_checkpoint=str(tmp_path / "b" / "ck" / f"checkpoint-{kill}"))
    draw = "guided/draw" if method == "guided" else "codapo/draw"
    cols = [draw, "rollouts/generated", "rollouts/generated_tokens", "reward"]
    steps = list(range(kill + 1, 4))
    pd.testing.assert_frame_equal(step_log(straight).loc[steps, cols], step_log(resumed).loc[steps, cols])


def test_a_codapo_batch_that_cannot_split_is_refused_before_any_job(tmp_path):
    from grpo_budget.config.schema import ConfigError

    cfg = yaml.safe_load((ROOT / "tests/configs/tiny.yaml").read_text())
    cfg["training"].update(prompts_per_step=6, num_generations=3, gradient_accumulation_steps=2,
                           codapo_resample_share=0.2, codapo_repeats=1, codapo_updates=1)
    cfg["sweep"] = {"training.method": ["grpo", "codapo"]}
    with pytest.raises(ConfigError, match=r"sweep variant codapo .*'training.codapo_repeats': CoDaPO adds 3 rollouts"):
        experiment_config.validate(cfg)


def test_a_chat_prompts_guidance_begins_the_assistants_answer(tiny_model_dir):
    from grpo_budget.generation.backends import load_tokenizer

    tok = load_tokenizer(str(tiny_model_dir))
    tok.chat_template = ("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
                         "{% if add_generation_prompt %}[assistant]{% endif %}")
    prompt = [{"role": "user", "content": "+5 ?"}]
    assert guided_prompt(prompt, "5", tok, None) == "[user]+5 ?[assistant]5"



def test_guided_rows_keep_a_kl_term_toward_the_reference_on_the_unguided_prompt(tmp_path, tiny_model_dir):
    trainer = make_trainer(tmp_path, tiny_model_dir, "guided", max_steps=2, beta=0.04)
    trainer.train()
    log = step_log(trainer)
    assert (log["guided/groups"] > 0).all() and log["kl"].notna().all() and (log["kl"] >= 0).all()


def test_a_new_method_is_one_registry_entry(monkeypatch, tmp_path, tiny_model_dir):
    """What docs/extending.md promises: register a method (here one that halves every advantage of a step's batch
    and adds a group of rollouts per step) and the config accepts it (as a sweep axis too), its training jobs carry
    it, the cost plan counts what it adds, and the trainer runs its hook and logs what it says."""
    seen = []

    def halve(trainer, batch, generate):
        seen.append(len(batch["advantages"]))
        batch["advantages"] = batch["advantages"] / 2
        return batch

    monkeypatch.setitem(METHODS, "halved", Method("a test of the registry", on_batch=halve,
                                                  extra_generations=lambda t: int(t.num_generations),
                                                  metrics=lambda counts: {"halved/steps": 1.0}))
    cfg = yaml.safe_load((ROOT / "tests/configs/tiny.yaml").read_text())
    cfg["sweep"] = {"training.method": ["grpo", "halved"]}
    cfg = experiment_config.validate(cfg)
    assert training_job(cfg, "tiny", "halved").settings["method"] == "halved"
    trains = {j.name: j for j in work.jobs(cfg) if j.rule == "train"}
    plain, halved = trains["tiny_framearith_hard_b0.2_s0_v-grpo"], trains["tiny_framearith_hard_b0.2_s0_v-halved"]
    assert halved.sequences == plain.sequences + halved.steps * 4 and halved.train_tokens == plain.train_tokens
    trainer = make_trainer(tmp_path, tiny_model_dir, "halved", max_steps=2)
    trainer.train()
    assert seen == [G * PROMPTS] * 2 and (step_log(trainer)["halved/steps"] == 1.0).all()
