"""Train stage: GRPO + LoRA with checkpoints, fingerprints and resume, and the embedded default's tiny base model."""
