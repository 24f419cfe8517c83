"""What a point computes and is compared with: its inputs and poisoned output, and the fp64 references this
worker computed, kept with keyed digests that a variant cannot forge (a variant that writes one is caught)."""
from __future__ import annotations

import random
import time
from collections import OrderedDict

from gemmbench import workloads
from gemmbench.measure import checking, devices
from gemmbench.run.task import Point
from kernels.registry import OPERAND_DTYPE


def operands_of(variant, backend, point: Point, mode: str, scaled: bool = False) -> tuple[list, object, object, object]:
    """Inputs for the point's shape (from its seed) stored as `mode` says (`scaled`: rows and columns scaled by powers
    of two, as validation's are), a NaN-poisoned output in its guarded buffer, and the workload's definition."""
    workload = workloads.get(variant.workload)
    return (backend.inputs(workload.operands(point.sizes), point.seed, mode, scaled),
            *backend.poisoned_output(workload.output(point.sizes)), workload)


class ReferenceChanged(RuntimeError):
    """The harness's fp64 reference no longer has the bytes it was computed with: something in the process wrote it."""


class References:
    """The fp64 references (and scales) this worker computed, newest last, kept within a byte budget: a shape's
    validation in every variant that a resident worker measures in turn checks against the same product (inputs are
    fixed by seed, shape and how the mode stores them: fp32 and tf32 share theirs). Each is kept with a keyed digest
    of its bytes (the key drawn from the operating system), checked before each use: a variant that writes the
    reference is caught, and the entry is computed again for the next."""

    # A 16384² reference and its scale (fp64 and, on a GPU, fp32) hold 3 GiB; the sweep's and awkward shapes of one
    # storage together about 5 GiB: the budget keeps both storages' (float32, bfloat16 bits), so none is computed
    # twice in a run whose jobs take the modes in any order
    BUDGET_BYTES = 12 << 30
    BUDGET_SHARE = 0.15  # and at most this share of the device's memory: the point's own buffers need the rest

    def __init__(self):
        self.kept: OrderedDict = OrderedDict()
        self.budget = self.BUDGET_BYTES
        self.salt = random.SystemRandom().getrandbits(64)

    def _digests(self, backend, pair) -> tuple:
        return tuple(backend.digest(x, self.salt) for x in pair)

    def verify(self, backend, only: tuple | None = None) -> int:
        """How many kept references (or only the pair `only`, as get returned it) no longer match their digests;
        those are dropped, to be computed again for the next."""
        written = [key for key, (pair, digests) in self.kept.items()
                   if (only is None or pair is only) and self._digests(backend, pair) != digests]
        for key in written:
            del self.kept[key]
        return len(written)

    def check(self, backend, pair: tuple) -> None:
        """Raises ReferenceChanged where `pair` (as get returned it) no longer has the bytes it was computed with."""
        if self.verify(backend, pair):
            raise ReferenceChanged("the harness's fp64 reference was written while the variant ran (its digest "
                                   "changed): a variant reached into the harness")

    def get(self, key, compute, backend) -> tuple[tuple, float]:
        """The reference of `key` and the seconds spent computing it here (0: kept from an earlier point)."""
        if key in self.kept:
            self.check(backend, self.kept[key][0])
            self.kept.move_to_end(key)
            return self.kept[key][0], 0.0
        start = time.perf_counter()
        pair = compute()
        self.kept[key] = pair, self._digests(backend, pair)
        while len(self.kept) > 1 and sum(x.nbytes for pair, _ in self.kept.values() for x in pair) > self.budget:
            self.kept.popitem(last=False)
        return pair, time.perf_counter() - start


REFERENCES = References()


def reference(workload, backend, operands) -> tuple:
    """(the fp64 result of `operands`, each element's scale (Workload.scale)), computed now."""
    wide = [devices.widened(backend.xp, x) for x in operands]
    pair = workload.reference(backend.xp, wide), workload.scale(backend.xp, wide, backend.nonnegative_product)
    backend.synchronize()
    return pair


def kept_reference(workload, backend, operands, point: Point, mode: str) -> tuple[tuple, float]:
    """The fp64 reference of `operands` (validation's inputs of the point: its seed, shape and storage fix them) and
    each element's scale, and the seconds spent computing them here (0: computed for an earlier point)."""
    return REFERENCES.get((workload.name, tuple(point.sizes.items()), point.seed, OPERAND_DTYPE[mode]),
                          lambda: reference(workload, backend, operands), backend)


def compare(expected: tuple, backend, out, buffer, mode: str, k: int) -> tuple[str, str, dict]:
    """(status, message, errors) of `out` against `expected` (reference, scale), and of the guard bands around it
    in `buffer` (None: checked elsewhere), once the device is done."""
    backend.synchronize()
    reference, scale = expected
    errors = backend.errors(reference, out, scale)
    errors["outside_writes"] = backend.outside_writes(buffer) if buffer is not None else 0
    return (*checking.verdict(errors, mode, k, out.size), errors)
