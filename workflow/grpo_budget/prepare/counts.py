"""How many items a dataset with local data files has in each split: its files read and split as the prepare job
does (the filter, repeats and caps included), so the cost plan counts a 150-row file as 150 items, not as the
benchmark whose name it borrows."""

from __future__ import annotations

import json
import logging
from functools import lru_cache

from grpo_budget.errors import UserError
from grpo_budget.prepare.splits import build

log = logging.getLogger(__name__)


@lru_cache(maxsize=32)
def _sizes(entry: str) -> dict[str, int] | None:
    try:
        return {split: len(frame) for split, frame in build(json.loads(entry)).items()}
    except (UserError, OSError, ValueError) as e:  # the prepare job says it; the plan falls back to estimates
        log.warning("the cost plan could not count the rows of %s (%s): it estimates them", entry[:80], e)
        return None


def local_sizes(ds: dict) -> dict[str, int] | None:
    """``{split: items}`` of a dataset entry read from local files; None for a built-in task or a hub copy."""
    if ds.get("source") == "builtin" or (ds.get("spec") or {}).get("data_files") is None:
        return None
    return _sizes(json.dumps(ds, sort_keys=True, default=str))
