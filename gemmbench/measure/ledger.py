"""Every timed launch accounted for: what each sample ran on, what it left, and the checks that hold it to that.

A kernel can be right when it is checked and fast when it is not: it may skip work once its output holds a result,
keep results by its inputs' addresses, or race now and then. So, outside the timed region of every sample:

- the output is poisoned again (NaN), so each sample must write all of it;
- the inputs alternate between copies at different addresses, and a copy used again has its first operand negated
  (a sign flip, exact in every mode), so a result kept from an earlier launch is wrong: every workload's result is
  linear in its first operand, and the negated product is the product negated, bit for bit;
- an order-sensitive fingerprint of the output's bits (salted per point, the sign undone) is queued: every sample's
  must equal the first's, so a swap of two elements or a race that fires once in many launches shows;
- a few samples, drawn by reservoir sampling from a host generator the variant cannot see, are copied aside and
  compared in full with the float64 reference afterwards, as is the last one.

Batched samples (several launches between one pair of events) give each launch its own copy of the inputs and its own
poisoned output, and get the same fingerprints and draws.
"""
from __future__ import annotations

import random

import numpy as np

HELD = 2  # samples drawn for a full comparison, besides the last one
BATCH_MEMORY = 512 << 20  # bytes of input copies and outputs a batch may take; fewer launches per batch above it
SIGN_BITS = {np.dtype(np.float32): np.uint32(0x80000000), np.dtype(np.uint16): np.uint16(0x8000)}  # fp32, bf16 bits


def negate(xp, x) -> None:
    """x = -x in place, exactly: the sign bit flipped (float32, or bfloat16 bits stored as uint16)."""
    mask = SIGN_BITS[np.dtype(x.dtype)]
    bits = x.view(xp.uint32 if x.dtype == xp.float32 else xp.uint16)
    xp.bitwise_xor(bits, mask, out=bits)


class Set:
    """One copy of the inputs and the output a launch writes, and the sign of the inputs now (±1)."""

    def __init__(self, operands: list, out, buffer):
        self.operands, self.out, self.buffer, self.sign, self.used = operands, out, buffer, 1, False

    def next_use(self, xp) -> None:
        """Before a launch on this set: a set used before gets its first operand negated; the output is poisoned."""
        if self.used:
            negate(xp, self.operands[0])
            self.sign = -self.sign
        self.used = True
        self.out.fill(xp.nan)


class Ledger:
    """The inputs and outputs of a point's timed launches, and what each sample left (see the module's docstring).
    `run(operands, out)` queues one launch."""

    def __init__(self, backend, operands: list, out, buffer, seed: int, copies: int = 2):
        self.backend, self.xp = backend, backend.xp
        self.sets = [Set(operands, out, buffer)]
        self.sets += [self._copy() for _ in range(copies - 1)]
        self.batch_sets: list[Set] = []
        self.draws = random.Random(seed ^ random.SystemRandom().getrandbits(64))
        self.salt = self.draws.getrandbits(63)
        self.prints = []  # per sample: the fingerprint slots it filled
        self.fingerprints = self.xp.zeros(0, dtype=self.xp.uint64)  # one zeroed slot per launch, filled once
        self.launches = 0  # launches fingerprinted so far
        self.held: list[tuple[int, object, int]] = []  # (sample, output copy, its sign)
        self.samples = 0
        self.current = self.last = self.sets[0]
        self._turn = self._launch = 0

    def _copy(self) -> Set:
        """Another copy of the inputs (at other addresses, with their original sign) and an output of its own."""
        first = self.sets[0]
        operands = [x.copy() for x in first.operands]
        if first.sign < 0:
            negate(self.xp, operands[0])
        return Set(operands, *self.backend.poisoned_output(first.out.shape))

    @property
    def operands(self) -> list:
        return self.current.operands

    @property
    def out(self):
        return self.current.out

    # one launch per sample

    def before(self) -> None:
        """Outside the timed region, before a one-launch sample: the next copy of the inputs, the output poisoned."""
        self.current = self.sets[self._turn % len(self.sets)]
        self._turn += 1
        self.current.next_use(self.xp)

    def after(self) -> None:
        """Outside the timed region, after a sample: its fingerprint queued, and maybe held for a full comparison."""
        self._take([self.current])

    # several launches per sample

    def batch(self, launches: int) -> int:
        """Sets for batches of `launches` (each launch its own inputs and output), fewer where they would take more
        than BATCH_MEMORY; returns the launches per batch (1: do not batch)."""
        per_set = sum(x.nbytes for x in self.sets[0].operands) + self.sets[0].buffer.nbytes
        launches = min(launches, BATCH_MEMORY // max(per_set, 1))
        if launches > 1:
            self.batch_sets = [self._copy() for _ in range(launches)]
        return max(launches, 1)

    def before_batch(self) -> None:
        for s in self.batch_sets:
            s.next_use(self.xp)
        self._launch = 0

    def batch_run(self, run):
        """run(operands, out) on each batch set in turn, one per call."""
        def launch():
            s = self.batch_sets[self._launch % len(self.batch_sets)]
            self._launch += 1
            run(s.operands, s.out)
        return launch

    def after_batch(self) -> None:
        self._take(self.batch_sets)

    def _take(self, sets: list[Set]) -> None:
        need = self.launches + len(sets)
        if need > len(self.fingerprints):  # grown by doubling; the sums stay on the device until the end
            grown = self.xp.zeros(max(2 * len(self.fingerprints), need, 64), dtype=self.xp.uint64)
            grown[:self.launches] = self.fingerprints[:self.launches]
            self.fingerprints = grown
        for s in sets:
            self.backend.fingerprint(s.out, s.sign, self.salt, self.fingerprints[self.launches:self.launches + 1])
            self.launches += 1
        self.prints.append((self.launches - len(sets), len(sets)))
        self.last = sets[-1]
        self.samples += 1
        # reservoir sampling: each sample so far is held with the same chance, HELD / samples
        chosen = sets[self.draws.randrange(len(sets))]
        if len(self.held) < HELD:
            self.held.append((self.samples, chosen.out.copy(), chosen.sign))
        else:
            slot = self.draws.randrange(self.samples)
            if slot < HELD:
                self.held[slot] = (self.samples, chosen.out.copy(), chosen.sign)

    # afterwards

    def differing(self) -> tuple[int, str]:
        """(samples whose output is not the first sample's, bit for bit once the sign is undone, what the first such
        one ran on)."""
        sums = self.backend.to_host(self.fingerprints[:self.launches])
        if not len(sums):
            return 0, ""
        bad = [i for i, (start, count) in enumerate(self.prints) if np.any(sums[start:start + count] != sums[0])]
        return len(bad), (f"the first at sample {bad[0] + 1} of {self.samples}" if bad else "")

    def held_outputs(self) -> list[tuple[str, object]]:
        """(what it is, the output with its sign undone) of each drawn sample and of the last one's."""
        found = []
        for sample, out, sign in self.held:
            if sign < 0:
                negate(self.xp, out)
            found.append((f"sample {sample} of {self.samples} (drawn at random)", out))
        out = self.last.out.copy()
        if self.last.sign < 0:
            negate(self.xp, out)
        found.append((f"the last sample ({self.samples} of {self.samples})", out))
        return found

    def buffers(self) -> list:
        return [s.buffer for s in self.sets + self.batch_sets]
