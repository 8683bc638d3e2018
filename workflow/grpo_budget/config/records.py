"""The one rule that keeps records valid across new fields: a field added after runs were recorded is left out of
what is recorded (a job's settings, a training fingerprint, the run listing) wherever it holds the value that does
what those runs did, so their records, fingerprints and listings read as before and nothing re-runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_budget.config import schema


@dataclass(frozen=True)
class Added:
    """A field added after runs were recorded: ``was`` does what those runs did; ``along`` names fields that act
    only with this one, left out with it."""

    was: Any
    along: tuple[str, ...] = ()


def left_out(values: dict, added: dict[str, Added]) -> dict:
    """``values`` without each field of ``added`` (a dotted path for a nested field) that holds its ``was``, and
    that field's ``along``. A copy; ``values`` is unchanged."""
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
            if key in node and node[key] == field.was:
                for k in (key, *field.along):
                    node.pop(k, None)
    return out


# What each kind of record leaves out. Each kind began at its own time, so each names the fields added since; a
# training field's ``was`` is its schema default (absent: None), which does what the runs before it did.
_TRAINING = schema.defaults(("training",))
# A training job's settings (its provenance record; the method's own settings travel only with their method).
TRAINING_JOB = {"method": Added(_TRAINING["method"]), "rewards": Added(_TRAINING["rewards"])}
# A training run's fingerprint (which checkpoints it may resume): older than job records.
FINGERPRINT = {
    **TRAINING_JOB,
    "dtype": Added(schema.defaults(schema.MODEL)["dtype"]),
    "top_k": Added(_TRAINING["top_k"]),
    "dynamic_sampling": Added(_TRAINING["dynamic_sampling"], along=("dynamic_max_rounds",)),
    "lora.layers": Added(None),
}
# The run listing the aggregate jobs read (named by its digest), and each run in it: a sweep's, a proxy's and
# analysis.drift's fields.
LISTING = {"variants": Added({}), "proxy_scores": Added([])}
LISTED_RUN = {"variant": Added(""), "drift": Added("")}
