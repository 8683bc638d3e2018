"""The train log (``train_log.parquet``) from the Trainer's log history: a resumed run's has the rows, columns and
values of the run that was never interrupted, but for the wall-clock columns and ``resumed_from``.

A resumed Trainer restores the rows before its checkpoint from ``trainer_state.json``, which stores each row's keys
sorted, so its columns would come in another order; its final row's ``train_loss`` would cover only the steps of its
own ``train()`` call; and a job killed after its last checkpoint trains nothing, so it would have no final row at all.
The columns' order as first logged is kept beside the checkpoints (:data:`COLUMNS_FILE`) for that last case.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.io import read_json, write_json

COLUMNS_FILE = "log_columns.json"  # in the checkpoints folder, beside fingerprint.json
# The Trainer's final row (transformers' speed_metrics, then total_flos and train_loss), in its order.
SUMMARY = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss")
WALL_CLOCK = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "step_time")


def train_loss(history: list[dict]) -> float:
    """The Trainer's ``train_loss`` of a run trained from step 0 that logs every step: its steps' losses summed in
    order (as ``Trainer._total_loss_scalar``), over the steps."""
    total, steps = 0.0, 0
    for row in history:
        if "loss" in row:
            total += row["loss"]
            steps += 1
    return total / max(steps, 0.001)


def first_seen(rows: list[dict]) -> list[str]:
    """The keys of ``rows`` in the order they first appear (the order of ``pd.DataFrame(rows)``'s columns)."""
    return list(dict.fromkeys(key for row in rows for key in row))


def whole_run(history: list[dict], resumed_from: int, state: dict | None = None,
              columns: list[str] | None = None) -> pd.DataFrame:
    """The train log of a run's ``history`` (``TrainerState.log_history``), resumed after step ``resumed_from`` (0:
    trained from the start, taken as it is). Resumed, its final row's ``train_loss`` is the whole run's; without a
    final row (nothing trained), one is added from the checkpoint's ``state`` (``trainer_state.json``), its wall
    times unknown (NaN). Columns come in ``columns``' order (as first logged), else the order of the rows logged
    after ``resumed_from``."""
    if not resumed_from:
        return pd.DataFrame(history)
    rows = [dict(row) for row in history]
    final = next((row for row in reversed(rows) if "train_loss" in row), None)  # this job's, else a restored one
    if final is None:
        final = {key: math.nan for key in SUMMARY}
        final.update(total_flos=state["total_flos"], epoch=state["epoch"], step=state["global_step"])
        rows.append(final)
    final["train_loss"] = train_loss(rows)
    frame = pd.DataFrame(rows)
    live = columns or first_seen([row for row in rows if row.get("step", 0) > resumed_from])
    return frame[list(dict.fromkeys([c for c in live if c in frame] + list(frame.columns)))]


def read_columns(checkpoint_dir: Path) -> list[str] | None:
    try:
        columns = read_json(Path(checkpoint_dir) / COLUMNS_FILE)
    except UserError:  # absent (checkpoints of an older run) or unreadable: the live rows' order is used
        return None
    return columns if isinstance(columns, list) and all(isinstance(c, str) for c in columns) else None


def column_recorder(resumed_from: int):
    """A ``TrainerCallback`` that writes, at a run's first save, the order in which its steps' columns were first
    logged (the rows after ``resumed_from``, which the Trainer logged itself), unless the folder has it already."""
    from transformers import TrainerCallback

    class RecordColumns(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            path = Path(args.output_dir) / COLUMNS_FILE
            if state.is_world_process_zero and read_columns(path.parent) is None:
                live = [row for row in state.log_history if row.get("step", 0) > resumed_from]
                if live:
                    write_json(first_seen(live), path)

    return RecordColumns()
