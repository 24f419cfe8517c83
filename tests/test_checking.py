import numpy as np
import pytest

from gemmbench import backend as backends
from gemmbench.checking import verdict


def reference(a, b):
    """The fp64 product the harness checks a gemm against."""
    return a.astype("float64") @ b.astype("float64")


@pytest.fixture
def cpu():
    return backends.Backend()


def test_inputs_are_seeded_fresh_and_never_trivial(cpu):
    a1, b1 = cpu.inputs([(33, 65), (65, 17)], seed=1)
    a2, _ = cpu.inputs([(33, 65), (65, 17)], seed=1)
    a3, _ = cpu.inputs([(33, 65), (65, 17)], seed=2)
    assert a1.dtype == np.float32 and a1.shape == (33, 65) and b1.shape == (65, 17)
    np.testing.assert_array_equal(a1, a2)
    assert not np.array_equal(a1, a3)
    assert a1.min() < -0.5 and a1.max() > 0.5 and np.count_nonzero(a1) == a1.size
    assert backends.seed_for(1, 2, 3, 4) != backends.seed_for(1, 2, 3, 5)


def test_correct_product_passes(cpu):
    a, b = cpu.inputs([(100, 201), (201, 37)], seed=3)
    c = cpu.poisoned_output((100, 37))
    np.matmul(a, b, out=c)
    status, message = verdict(cpu.errors(reference(a, b), c), 1e-4, c.size)
    assert status == "ok", message


def test_unwritten_outputs_fail(cpu):
    a, b = cpu.inputs([(20, 40), (40, 30)], seed=4)
    c = cpu.poisoned_output((20, 30))
    c[:, :-1] = a @ b[:, :-1]  # last column never written
    status, message = verdict(cpu.errors(reference(a, b), c), 1e-4, c.size)
    assert status == "failed" and "20 of 600 outputs are NaN" in message


def test_wrong_values_fail_on_the_norm(cpu):
    a, b = cpu.inputs([(64, 64), (64, 64)], seed=5)
    c = (a @ b.T).astype(np.float32)  # a classic indexing bug
    status, message = verdict(cpu.errors(reference(a, b), c), 1e-4, c.size)
    assert status == "failed" and "relative error" in message


def test_one_wrong_element_fails_on_the_max_error_even_when_the_norm_passes(cpu):
    a, b = cpu.inputs([(1024, 1024), (1024, 1024)], seed=6)
    c = a @ b
    c[5, 7] += 1.0
    errors = cpu.errors(reference(a, b), c)
    assert errors["rel_error"] < 1e-4  # the Frobenius norm alone would miss it
    status, message = verdict(errors, 1e-4, c.size)
    assert status == "failed" and "max element error" in message


def test_tf32_sized_errors_pass_tf32_tolerance_but_not_fp32(cpu):
    a, b = cpu.inputs([(128, 512), (512, 128)], seed=7)
    # Round the inputs to TF32 (10 explicit mantissa bits), as the tensor cores do.
    tf32 = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)  # noqa: E731
    c = tf32(a) @ tf32(b)
    errors = cpu.errors(reference(a, b), c)
    assert verdict(errors, 2e-3, c.size)[0] == "ok"
    assert verdict(errors, 1e-5, c.size)[0] == "failed"
