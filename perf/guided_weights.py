"""What a guided row weighs in the update, before and after issue 56: the guided rows' token ratios, weights and
share of the update, logged by every guided step (train_log ``guided/*``), for the project's former objective
(guidance continuing the answer, TRL's PPO clip, every guided group kept) beside Guide-GRPO's (guidance in the
prompt, shaping r / (r + gamma), unmixed guided groups dropped), on the same subset, model and seed.

Reads the subset, model and dataset entry of a finished run of ``configs/guided-cpu.yaml``:

    .venv/bin/python perf/guided_weights.py --results results-guided --policy hard --steps 30
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grpo_budget.config.settings import Training  # noqa: E402
from method_steps import recorded_arm, train_log  # noqa: E402  (the run's arm read and trained, as there)

FORMS = {
    "before (continuation, ppo clip, all kept)": {"guidance_place": "continuation", "guidance_objective": "ppo",
                                                  "guidance_filter": False},
    "after (prompt, Guide's shaping, filter)": {},  # the defaults
}
COLUMNS = ["guided/groups", "guided/dropped", "guided/ratio_median", "guided/ratio_p10", "guided/ratio_p90",
           "guided/weight_median", "guided/zero_weight_share", "guided/update_share"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default="results-guided")
    p.add_argument("--policy", default="hard")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    results = Path(a.results)
    settings, dataset, subset = recorded_arm(results, a.policy, "guided")
    rows = {}
    for name, form in FORMS.items():
        t = Training.from_dict({**settings, **form, "max_steps": a.steps, "save_steps": a.steps})
        log = train_log(results, subset, t, dataset, seed=a.seed)
        steps = log.reindex(columns=COLUMNS)
        rows[name] = {"steps": len(log), "steps with guided rows": int(steps["guided/ratio_median"].notna().sum()),
                      **{c.removeprefix("guided/"): steps[c].mean() for c in COLUMNS}}
    print(f"{a.policy} subset of {results}, {a.steps} steps, seed {a.seed}: per-step values, mean over the steps")
    print(pd.DataFrame(rows).T.to_string(float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
