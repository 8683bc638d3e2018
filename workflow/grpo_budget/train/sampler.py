"""The order in which a run takes its subset's prompts, pass after pass, the same whether or not it was resumed.

TRL's ``RepeatSampler`` shuffles each pass over the subset (an epoch) with one generator seeded when the sampler is
built, so pass ``e`` of a run takes the ``e + 1``-th permutation that generator draws. A resumed run builds a new
sampler and the Trainer does not replay the passes before its checkpoint, so a run resumed in pass ``e >= 1`` took
pass 0's order again (measured: every step after the resume drew other prompts). :func:`epoch_sampler` draws pass
``e``'s permutation from a fresh generator after ``e`` discarded ones, the very permutations a run that was never
interrupted takes, so its order, and with it the uninterrupted run, stays as it was.
"""

from __future__ import annotations


def epoch_sampler(**kwargs):
    """A TRL ``RepeatSampler`` (same arguments) whose pass ``e`` is told by ``set_epoch(e)``, which the Trainer calls
    (through accelerate's data loader) before each pass, a resumed one included; a pass begun without it takes the
    next permutation, as ``RepeatSampler`` does."""
    import torch
    from trl.trainer.utils import RepeatSampler

    class EpochSampler(RepeatSampler):
        epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = int(epoch)

        def __iter__(self):
            if self.shuffle:
                self.generator = torch.Generator()  # as RepeatSampler seeds it, then the passes before this one
                if self.seed is not None:
                    self.generator.manual_seed(self.seed)
                for _ in range(self.epoch):
                    torch.randperm(self.num_samples, generator=self.generator)
            self.epoch += 1
            return super().__iter__()

    return EpochSampler(**kwargs)
