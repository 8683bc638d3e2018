"""The GPU objective pinned and visible, in the records: TRL's vLLM importance-sampling settings and dynamic
sampling's new settings count in a training job's record and fingerprint only where they act, and where they do what
runs made before them did, those runs' records read as before."""

import copy

import pytest

from conftest import TINY
from grpo_budget.cluster.jobs import training_job
from grpo_budget.config.schema import ConfigError
from grpo_budget.config.settings import Training
from grpo_budget.experiment import config
from grpo_budget.train.fingerprint import trajectory_settings
from grpo_budget.train.objective import VLLM_FIELDS

NEW = {"dynamic_at_cap", "dynamic_metric", *VLLM_FIELDS}


def tiny(**training) -> dict:
    cfg = config.load(TINY)
    cfg["training"] = dict(cfg["training"], **training)
    return config.validate(cfg)


def paper(**training) -> dict:
    cfg = config.load("configs/hard-examples.yaml")
    cfg["training"] = dict(cfg["training"], **training)
    return config.validate(cfg)


@pytest.mark.parametrize("use_vllm", [False, True])
def test_a_cpu_runs_job_record_reads_as_before_the_settings(use_vllm):
    """On the CPU no rollout comes from vLLM and dynamic sampling is off by default: the record has the fields and
    values it had before (dynamic_max_rounds: 4, whose default is now 9), none of the new ones."""
    s = training_job(tiny(use_vllm=use_vllm), "tiny").settings
    assert s["dynamic_sampling"] is False and s["dynamic_max_rounds"] == 4 and not NEW & set(s)
    assert Training.from_dict(s).dynamic_max_rounds == 4  # idle: dynamic sampling is off


def test_a_dynamic_runs_record_names_the_sourced_cap_and_dapos_filter():
    """Runs made with dynamic sampling before filtered on the total reward in at most 4 extra rounds: they differ
    from the defaults now, and run again; fill, what they did at the cap, stays out, and so does the filter where
    the correct reward is the only one (accuracy and the total reward then keep the same groups)."""
    only_correct = training_job(tiny(dynamic_sampling=True), "tiny").settings
    assert only_correct["dynamic_max_rounds"] == 9 and not {"dynamic_metric", "dynamic_at_cap"} & set(only_correct)
    assert training_job(tiny(dynamic_sampling=True, dynamic_max_rounds=4), "tiny").settings == \
        dict(only_correct, dynamic_max_rounds=4)  # the record of a run made before with the correct reward
    s = training_job(tiny(dynamic_sampling=True, rewards={"correct": 1.0, "format": 0.1}), "tiny").settings
    assert (s["dynamic_max_rounds"], s["dynamic_metric"]) == (9, "accuracy") and "dynamic_at_cap" not in s
    t = Training.from_dict(s)
    assert (t.dynamic_max_rounds, t.dynamic_metric, t.dynamic_at_cap) == (9, "accuracy", "fill")
    # set to what they did, the fingerprint is theirs: the job runs again and resumes their checkpoints
    old = Training.from_dict(dict(s, dynamic_max_rounds=4, dynamic_metric="reward"))
    assert {"dynamic_metric", "dynamic_at_cap"}.isdisjoint(trajectory_settings(old))


def test_a_vllm_runs_job_record_names_the_correction_it_trains_with():
    """With vLLM on cuda the mode and clip_max that differ from TRL 1.16's defaults are recorded; correction on and
    no clip_min (TRL's) stay out, and the job reads them back as they are."""
    s = training_job(paper(), "qwen3-4b").settings
    assert (s["vllm_importance_sampling_mode"], s["vllm_importance_sampling_clip_max"]) == ("token_truncate", 2.0)
    assert "vllm_importance_sampling_correction" not in s and "vllm_importance_sampling_clip_min" not in s
    t = Training.from_dict(s)
    assert t.vllm_importance_sampling_correction is True and t.vllm_importance_sampling_clip_min is None
    fp = trajectory_settings(t)
    assert fp["vllm_importance_sampling_mode"] == "token_truncate"
    trl = trajectory_settings(Training.from_dict(dict(s, vllm_importance_sampling_mode="sequence_mask",
                                                      vllm_importance_sampling_clip_max=3.0)))
    assert not set(VLLM_FIELDS) & set(trl)  # TRL 1.16's defaults: the fingerprint a run made before had


@pytest.mark.parametrize("training, field", [
    ({"vllm_importance_sampling_clip_min": 2.5}, "vllm_importance_sampling_clip_min"),  # not below clip_max 2
    ({"vllm_importance_sampling_clip_max": None}, "vllm_importance_sampling_clip_max"),  # truncate with no bound
    ({"dynamic_sampling": True, "rewards": {"format": 1.0}}, "dynamic_metric"),  # accuracy without correct
])
def test_settings_trl_would_refuse_are_refused_before_any_job_in_one_line(training, field):
    cfg = config.load(TINY)
    cfg["training"] = dict(copy.deepcopy(cfg["training"]), **training)
    with pytest.raises(ConfigError) as e:
        config.validate(cfg)
    assert f"config field 'training.{field}'" in str(e.value) and "allowed: " in str(e.value)
    assert "\n" not in str(e.value)
