"""Every timed launch accounted for, on content it has never seen.

A kernel can be right when it is checked and fast when it is not: it may skip work once its output holds a result,
keep results by its inputs' addresses or content, or leave work for after the timer stops. So, outside the timed
region of every sample:

- the inputs get fresh random content, from a key per sample drawn by a generator seeded from the operating system
  and each launch's keys derived from it (devices.set_key; the variant sees neither seed nor keys), and the output is
  poisoned (NaN): no product kept from an earlier launch, whatever it is keyed by (address, content, sign, scale,
  permutation), is the product of these inputs, and every element must be written again;
- Freivalds' test: A·(B·x) in float64 for x of random signs is queued before the launch (so a variant that writes
  its inputs cannot make them agree with its output) and C·x right behind it, on the same stream (O(n²) where the
  product is O(n³)), each row within the error bound of the mode (checking.projection_verdict). A kept product, a
  skipped tile or work left for later is off by the size of the product;
- a few samples, drawn by reservoir sampling, are copied aside and compared in full with the float64 reference of
  their inputs afterwards (their keys make the inputs again), which sees an error in one element that a projection
  over a row averages away;
- on a CPU, where the timer's stop is the host's, a few elements of the output drawn at random must already hold a
  value when the timer has stopped (work handed to a thread that finishes later shows as NaN there).

Batched samples (several launches between one pair of events) give every launch its own inputs and poisoned output,
each refreshed, tested and drawn alike; on a GPU each step of that takes one launch for all of a sample's launches
(cuda_device.CudaSets), as Python's launch of a small kernel takes longer than a short kernel runs.
"""
from __future__ import annotations

import random
import time

import numpy as np

from gemmbench.measure import checking

HELD = 2  # samples drawn for a full comparison
BATCH_MEMORY = 512 << 20  # bytes of input copies and outputs a batch may take; fewer launches per batch above it
PROBES = 64  # output elements a CPU sample must have written when its timer stops
LATER_S = 0.2  # how long a CPU output found unwritten is watched for work that lands after the timer


def _written_later(flat) -> bool:
    """Whether an output found unwritten when its timer stopped gets written within LATER_S (by work the variant
    left running), not left unwritten (work skipped, which Freivalds' test reports)."""
    deadline = time.perf_counter() + LATER_S
    while time.perf_counter() < deadline:
        if not np.isnan(flat).any():
            return True
        time.sleep(0.001)
    return False


class Ledger:
    """The inputs and outputs of a point's timed launches, and what each sample left (see the module's docstring).
    `guard`, once set (when sampling starts), says after each sample what changed in the process while it was timed
    (measure/guard.py). `held`: the samples drawn for a full comparison (a search's trial draws none: only its
    pick's time is used, and the pick's audit draws them; each costs an fp64 product of the point's shape)."""

    def __init__(self, backend, operands: list, out, buffer, seed: int, held: int = HELD):
        self.backend, self.xp, self.guard, self.keep = backend, backend.xp, None, held
        self.main = backend.sets([operands], [out], [buffer])  # one-launch samples
        self.batched = None  # batched samples' sets (devices.Sets), once `batch` made them
        self.draws = random.Random(seed ^ random.SystemRandom().getrandbits(64))
        self.residuals = self.xp.zeros((0, 2), dtype=self.xp.float64)  # per launch, filled on the device
        self.launches = 0  # launches tested so far
        self.held: list[tuple[int, list, object]] = []  # (sample, the keys of its inputs, a copy of its output)
        self.samples = 0
        self.incomplete: list[int] = []  # CPU samples whose output was not all written when the timer stopped
        self.changed: str | None = None  # the first change the guard saw

    @property
    def operands(self) -> list:
        return self.main.operands[0]

    @property
    def out(self):
        return self.main.outs[0]

    # one launch per sample

    def before(self) -> None:
        """Outside the timed region, before a one-launch sample: fresh inputs, the output poisoned."""
        self.main.refresh(self.draws.getrandbits(64))

    def after(self) -> None:
        """Outside the timed region, after a sample: the output probed (CPU), its test queued, maybe held."""
        self._probe(self.main)
        self._take(self.main)

    # several launches per sample

    def batch(self, launches: int) -> int:
        """Sets for batches of `launches` (each launch its own inputs and output), fewer where they would take more
        than BATCH_MEMORY; returns the launches per batch (1: do not batch)."""
        per_set = sum(x.nbytes for x in self.operands) + self.main.buffers[0].nbytes
        launches = min(launches, BATCH_MEMORY // max(per_set, 1))
        if launches > 1:
            outputs = [self.backend.poisoned_output(self.out.shape) for _ in range(launches)]
            self.batched = self.backend.sets([[x.copy() for x in self.operands] for _ in range(launches)],
                                             [out for out, _ in outputs], [buffer for _, buffer in outputs])
        return max(launches, 1)

    def before_batch(self) -> None:
        self.batched.refresh(self.draws.getrandbits(64))
        self._launch = 0

    def batch_run(self, run):
        """run(operands, out) on each batch set in turn, one per call."""
        def launch():
            j = self._launch % len(self.batched)
            self._launch += 1
            run(self.batched.operands[j], self.batched.outs[j])
        return launch

    def after_batch(self) -> None:
        self._probe(self.batched)
        self._take(self.batched)

    def _probe(self, sets) -> None:
        """First thing after the timer stopped: whether the process changed while the sample was timed; then, on a
        CPU, drawn elements of each output must hold a value."""
        if self.guard and self.changed is None:
            self.changed = self.guard.changed()
        if self.backend.device == "cpu":
            for out in sets.outs:
                flat = out.reshape(-1)
                picks = [self.draws.randrange(flat.size) for _ in range(min(PROBES, flat.size))]
                if np.isnan(flat[picks]).any() and _written_later(flat):
                    self.incomplete.append(self.samples + 1)
                    break

    def _take(self, sets) -> None:
        need = self.launches + len(sets)
        if need > len(self.residuals):  # grown by doubling; the tests' results stay on the device until the end
            grown = self.xp.zeros((max(2 * len(self.residuals), need, 64), 2), dtype=self.xp.float64)
            grown[:self.launches] = self.residuals[:self.launches]
            self.residuals = grown
        sets.project(self.residuals[self.launches:need])
        self.launches = need
        self.samples += 1
        # reservoir sampling: each sample so far is held with the same chance, keep / samples
        chosen = self.draws.randrange(len(sets))
        slot = len(self.held) if len(self.held) < self.keep else self.draws.randrange(self.samples)
        if slot < self.keep:
            self.held[slot:slot + 1] = [(self.samples, sets.keys(chosen), sets.outs[chosen].copy())]

    # afterwards

    def problem(self, mode: str, k: int) -> str | None:
        """Why the timed launches did not all compute the product of their own inputs, or None."""
        if self.changed:
            return f"refused: {self.changed} while it was timed (work could run outside the timed region)"
        if self.incomplete:
            return (f"{len(self.incomplete)} of {self.samples} samples had outputs not yet written when the timer "
                    f"stopped, written a moment later (the first: sample {self.incomplete[0]}): work left to run "
                    f"after the timed region")
        residuals = self.backend.to_host(self.residuals[:self.launches])
        return checking.projection_verdict([tuple(r) for r in residuals], mode, k)

    def held_outputs(self):
        """(what it is, its inputs made again from their keys, its output) of each drawn sample; the inputs are the
        one-launch set's arrays, filled anew for each."""
        inputs = self.operands
        for sample, keys, out in self.held:
            for x, key in zip(inputs, keys):
                self.backend.fill_random(x, key)
            yield f"sample {sample} of {self.samples} (drawn at random)", inputs, out

    def buffers(self) -> list:
        return self.main.buffers + (self.batched.buffers if self.batched else [])
