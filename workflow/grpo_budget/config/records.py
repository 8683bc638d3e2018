"""The one rule that keeps records valid across new fields: a field added after runs were recorded is left out of
what is recorded (a job's settings, a training fingerprint, the run listing) wherever it holds the value that does
what those runs did, so their records, fingerprints and listings read as before and nothing re-runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grpo_budget.config import schema


ACTS = object()  # an ``Added.was`` no value equals: a field whose default differs from what runs did before


@dataclass(frozen=True)
class Added:
    """A field added after runs were recorded: ``was``, its default, does what those runs did (:data:`ACTS`: its
    default does not, so it counts wherever it acts); ``along`` names fields that act only with this one, left out
    with it; ``idle`` (of the record's values, at its level) says where the field does nothing at all, so it is left
    out whatever it holds (a job given no value takes the default, which does nothing there either)."""

    was: Any
    along: tuple[str, ...] = ()
    idle: Callable[[dict], bool] | None = None


@dataclass(frozen=True)
class Idle:
    """A field whose default changed after runs were recorded, that acts only where ``idle`` is false (of the
    record's values): where it is idle it is recorded as ``recorded``, the default those runs recorded, so their
    records read as before; where it acts, its value counts (runs made with the old default differ and run again)."""

    recorded: Any
    idle: Callable[[dict], bool]


def left_out(values: dict, added: dict[str, Added | Idle]) -> dict:
    """``values`` without each field of ``added`` (a dotted path for a nested field) that holds its ``was`` or is
    ``idle``, and that field's ``along``; an :class:`Idle` field that is idle as it ``recorded``. A copy; ``values``
    is unchanged."""
    out = dict(values)
    for path, field in added.items():
        *parents, key = path.split(".")
        node = out
        for p in parents:
            if not isinstance(node.get(p), dict):
                break
            node[p] = dict(node[p])  # copied on the way down: the caller's nested sections stay as they are
            node = node[p]
        else:
            idle = field.idle is not None and field.idle(node)
            if isinstance(field, Idle):
                if key in node and idle:
                    node[key] = field.recorded
            elif key in node and (node[key] == field.was or idle):
                for k in (key, *field.along):
                    node.pop(k, None)
    return out


# What each kind of record leaves out. Each kind began at its own time, so each names the fields added since; a
# training field's ``was`` is its schema default (absent: None), which does what the runs before it did.
_TRAINING = schema.defaults(("training",))


def _static(s: dict) -> bool:
    """Dynamic sampling is off: its cap, what it does there and its filter do nothing."""
    return not s.get("dynamic_sampling")


def _same_filter(s: dict) -> bool:
    """Dynamic sampling is off, or the correct reward (0 or 1) is the only reward: then a group's total rewards
    differ exactly where its correctness does, and the filter's metric changes nothing."""
    return _static(s) or set(s.get("rewards", _TRAINING["rewards"])) == {"correct"}


def _no_vllm(s: dict) -> bool:
    """No rollouts come from vLLM (off, or training on the CPU, where TRL's vLLM is never used): TRL's importance
    sampling correction does nothing."""
    return not s.get("use_vllm") or s.get("device") == "cpu"


# Dynamic sampling filled a short batch (fill, the default) but filtered on the total reward and stopped after 4
# rounds (the defaults now are DAPO's accuracy and verl's cap): runs made with it then differ and train again, but
# for the filter where only the correct reward is trained (the default), which it does not change.
_DYNAMIC = {"dynamic_max_rounds": Idle(4, idle=_static), "dynamic_at_cap": Added("fill", idle=_static),
            "dynamic_metric": Added(ACTS, idle=_same_filter)}
# With vLLM, TRL 1.16's defaults applied (correction on, sequence_mask, clip_max 3.0, no clip_min); the mode and
# clip_max defaults now differ (TIS), so a run made with vLLM before trains again.
_VLLM_IS = {"vllm_importance_sampling_correction": Added(True, idle=_no_vllm),
            "vllm_importance_sampling_mode": Added(ACTS, idle=_no_vllm),
            "vllm_importance_sampling_clip_max": Added(ACTS, idle=_no_vllm),
            "vllm_importance_sampling_clip_min": Added(None, idle=_no_vllm)}
# A training job's settings (its provenance record; the method's own settings travel only with their method).
TRAINING_JOB = {"method": Added(_TRAINING["method"]), "rewards": Added(_TRAINING["rewards"]), **_DYNAMIC, **_VLLM_IS}
# A training run's fingerprint (which checkpoints it may resume): older than job records. It builds no settings, so
# a field left out at what runs did before need not be its default: a run set to do what an older one did resumes
# that run's checkpoints (its job, whose record carries the value, runs again and finds them).
FINGERPRINT = {
    **TRAINING_JOB,
    "dynamic_metric": Added("reward", idle=_same_filter),
    "vllm_importance_sampling_mode": Added("sequence_mask", idle=_no_vllm),
    "vllm_importance_sampling_clip_max": Added(3.0, idle=_no_vllm),
    "dtype": Added(schema.defaults(schema.MODEL)["dtype"]),
    "top_k": Added(_TRAINING["top_k"]),
    "dynamic_sampling": Added(_TRAINING["dynamic_sampling"],
                              along=("dynamic_max_rounds", "dynamic_at_cap", "dynamic_metric")),
    "lora.layers": Added(None),
}
# The run listing the aggregate jobs read (named by its digest), and each run in it: a sweep's, a proxy's and
# analysis.drift's fields.
LISTING = {"variants": Added({}), "proxy_scores": Added([])}
LISTED_RUN = {"variant": Added(""), "drift": Added("")}
