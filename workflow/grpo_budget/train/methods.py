"""Training methods (``training.method``): how an arm trains on what it bought, beside which items it bought.

Each method is one entry of :data:`METHODS`, which carries all that the rest of the package knows of it: the settings
it owns and the choices they name (the config's enums), whether it reads reference solutions, the trainer hooks it
uses, the rows and rollouts a step of it adds, a batch it cannot split, and what it logs per step. The plans, the
config checks and the trainer ask the entry, never the method's name (docs/extending.md: adding a method).

- ``grpo``: TRL's GRPO as configured (the default).
- ``codapo``: CoDaPO, values that weigh each group and a second update per batch on its best questions, generated
  again after the first (:mod:`grpo_budget.train.codapo`).
- ``guided``: off-context guided rollouts, failed groups generated again with a solution's prefix as guidance,
  trained on the unguided prompt under an importance correction (:mod:`grpo_budget.train.guided`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from grpo_budget.config.settings import Training
from grpo_budget.train import codapo, guidance, guided, offpolicy

# hook(trainer, inputs, out, generate) -> out: on each round's scored rollouts; generate(rows) scores more rows
RolloutsHook = Callable[..., dict]
# hook(trainer, batch, generate) -> batch: on the step's batch, once it is whole
BatchHook = Callable[..., dict]
# hook(trainer, model, inputs, base) -> loss: a micro-batch's loss in training, base(model, inputs) being TRL's
LossHook = Callable[..., object]
# hook(trainer, inputs) -> inputs: on the step's prompts (G rows each) before anything is generated
InputsHook = Callable[..., list]


def _none(t: Training) -> int:
    return 0


@dataclass(frozen=True)
class Method:
    source: str
    settings: tuple[str, ...] = ()  # the training.* settings it owns (no other method reads them)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # its settings that name choices: enums
    needs_solutions: bool = False  # reads each item's reference solution (training refuses items without)
    on_inputs: InputsHook | None = None
    on_rollouts: RolloutsHook | None = None
    on_batch: BatchHook | None = None
    on_loss: LossHook | None = None
    extra_rows: Callable[[Training], int] = _none  # rollouts a step's batch gains beyond prompts x G (trained)
    extra_generations: Callable[[Training], int] = _none  # rollouts a step surely generates beyond its batch
    # optimizer steps per batch the sampler draws (each a step of the run: the sampler gives a batch that many steps)
    updates_per_batch: Callable[[Training], int] = lambda t: 1
    # (the setting to change, why) where a step's rows cannot split into the micro-batches, else None
    batch_problem: Callable[[Training, int], tuple[str, str] | None] = lambda t, micro_batches: None
    counts: Callable[[], dict] = dict  # a step's tally, fresh at each step, which its hooks add to
    metrics: Callable[[dict], dict] = lambda counts: {}  # what a step logs (train_log columns), from its tally

    @property
    def changes_groups(self) -> bool:
        """Whether its hooks change a step's groups (which TRL spreads over processes: one process only)."""
        return self.on_inputs is not None or self.on_rollouts is not None or self.on_batch is not None

    def own(self, t: Training) -> dict:
        """Its settings in ``t``, by name."""
        return {k: t.method_settings[k] for k in self.settings}

    def rows_per_step(self, t: Training) -> int:
        """Rollouts a step trains on: the step's prompts x G, and what the method adds."""
        return int(t.prompts_per_step) * int(t.num_generations) + self.extra_rows(t)

    def generations_per_step(self, t: Training) -> int:
        """Rollouts a step surely generates (more with dynamic sampling's rounds or guidance of failed groups)."""
        return self.rows_per_step(t) + self.extra_generations(t)

    def micro_batch(self, t: Training) -> int:
        """Rollouts in one micro-batch on one process: TRL's per-device batch, and the method's share of its rows
        (which split evenly: :meth:`batch_problem`)."""
        return t.per_device_batch + self.extra_rows(t) // int(t.gradient_accumulation_steps)


METHODS: dict[str, Method] = {
    "grpo": Method("TRL GRPOTrainer as configured"),
    "codapo": Method("Zhou et al. 2026 (arXiv 2606.07950), tmlr-group/CoDaPO", settings=codapo.SETTINGS,
                     choices={"codapo_resample": codapo.RESAMPLE_RULES}, on_inputs=codapo.refocus_inputs,
                     on_batch=codapo.weigh_and_resample, extra_rows=codapo.extra_rows,
                     updates_per_batch=codapo.updates, batch_problem=codapo.batch_problem, counts=codapo.counts,
                     metrics=codapo.metrics),
    "guided": Method("OC-GRPO; Guide-GRPO (Nath et al. 2025, arXiv 2506.13923)", settings=guided.SETTINGS,
                     choices={"guidance_when": guided.GUIDE_WHEN, "guidance_place": guidance.PLACES,
                              "guidance_objective": offpolicy.FORMS, "guidance_gamma_over": offpolicy.GAMMA_OVER},
                     needs_solutions=True, on_rollouts=guided.guide, on_loss=guided.loss,
                     extra_generations=guided.certain_generations, counts=guided.counts, metrics=guided.metrics),
}


def method_of(t: Training) -> Method:
    return METHODS[t.method]


def others_settings(method: str) -> set[str]:
    """The settings of every method but ``method``: a run of ``method`` neither reads nor records them."""
    return {k for name, m in METHODS.items() if name != method for k in m.settings}
