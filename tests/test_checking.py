import numpy as np
import pytest

from gemmbench import workloads
from gemmbench.measure import checking, devices
from gemmbench.measure.checking import verdict


def checked(cpu, a, b, c, mode="fp32"):
    """The harness's verdict on c = a @ b in `mode`: errors against the fp64 product, each element's against its
    own scale."""
    wide = [a.astype("float64"), b.astype("float64")]
    gemm = workloads.get("gemm")
    errors = cpu.errors(gemm.reference(np, wide), c, gemm.scale(np, wide, cpu.nonnegative_product))
    return (*verdict(errors, mode, a.shape[1], c.size), errors)


@pytest.fixture
def cpu():
    return devices.Backend()


def test_inputs_are_seeded_fresh_and_never_trivial(cpu):
    a1, b1 = cpu.inputs([(33, 65), (65, 17)], seed=1)
    a2, _ = cpu.inputs([(33, 65), (65, 17)], seed=1)
    a3, _ = cpu.inputs([(33, 65), (65, 17)], seed=2)
    assert a1.dtype == np.float32 and a1.shape == (33, 65) and b1.shape == (65, 17)
    np.testing.assert_array_equal(a1, a2)
    assert not np.array_equal(a1, a3)
    assert a1.min() < -0.5 and a1.max() > 0.5 and np.count_nonzero(a1) == a1.size
    assert devices.seed_for(1, 2, 3, 4) != devices.seed_for(1, 2, 3, 5)


def test_bf16_inputs_are_the_fp32_inputs_rounded_to_nearest_even(cpu):
    (a,) = cpu.inputs([(64, 64)], seed=1)
    (bits,) = cpu.inputs([(64, 64)], seed=1, mode="bf16")
    assert bits.dtype == np.uint16
    values = devices.widened(np, bits)
    assert values.dtype == np.float64 and np.all(np.abs(values - a) <= 2.0**-8 * np.abs(a))  # half a BF16 ulp
    assert np.any(values != a)
    # halfway between two BF16 values goes to the even one; just past halfway goes up
    ties = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-8 + 2**-20], dtype=np.float32)
    np.testing.assert_array_equal(devices.widened(np, devices.bf16_bits(np, ties)),
                                  [1.0, 1 + 2**-6, -1.0, 1 + 2**-7])


def test_bf16_operands_count_two_bytes_each_the_output_four():
    gemm = workloads.get("gemm")
    sizes = {"m": 100, "n": 30, "k": 50}
    assert gemm.min_bytes(sizes, "bf16") == 2 * (100 * 50 + 50 * 30) + 4 * 100 * 30
    assert gemm.min_bytes(sizes, "tf32") == gemm.min_bytes(sizes) == 4 * (100 * 50 + 50 * 30 + 100 * 30)


def test_correct_product_passes(cpu):
    a, b = cpu.inputs([(100, 201), (201, 37)], seed=3)
    c, _ = cpu.poisoned_output((100, 37))
    np.matmul(a, b, out=c)
    status, message, _ = checked(cpu, a, b, c)
    assert status == "ok", message


def test_unwritten_outputs_fail(cpu):
    a, b = cpu.inputs([(20, 40), (40, 30)], seed=4)
    c, _ = cpu.poisoned_output((20, 30))
    c[:, :-1] = a @ b[:, :-1]  # last column never written
    status, message, _ = checked(cpu, a, b, c)
    assert status == "failed" and "20 of 600 outputs are NaN" in message


def test_wrong_values_fail_on_the_norm(cpu):
    a, b = cpu.inputs([(64, 64), (64, 64)], seed=5)
    c = (a @ b.T).astype(np.float32)  # a classic indexing bug
    status, message, _ = checked(cpu, a, b, c)
    assert status == "failed" and "relative error" in message and "not fp32 arithmetic" in message


def test_one_wrong_element_fails_on_its_own_scale_even_when_the_norm_passes(cpu):
    a, b = cpu.inputs([(1024, 1024), (1024, 1024)], seed=6)
    c = a @ b
    c[5, 7] += 0.01
    status, message, errors = checked(cpu, a, b, c)
    assert errors["rel_error"] < checking.bound("fp32", 1024)  # the Frobenius norm alone would miss it
    assert status == "failed" and "an element's error is" in message


def test_one_dropped_product_term_is_caught_where_a_bound_on_the_largest_element_would_miss_it(cpu):
    """One small term missing from one element of a 1024 product: below the element bound times max|R| (a bound on
    the largest element), above that element's own."""
    a, b = cpu.inputs([(1024, 1024), (1024, 1024)], seed=8)
    wide = [a.astype("float64"), b.astype("float64")]
    scale = workloads.get("gemm").scale(np, wide, cpu.nonnegative_product)
    bound = checking.MAX_UNITS * checking.unit_error("fp32", 1024)
    reference_max = np.abs(wide[0] @ wide[1]).max()
    products = np.abs(a[:, :1] * b[:1, :])  # the p = 0 term of every element
    i, j = np.argwhere((products > 2 * bound * scale) & (products < 0.5 * bound * reference_max))[0]
    c = a @ b
    c[i, j] -= a[i, 0] * b[0, j]
    status, message, errors = checked(cpu, a, b, c)
    assert errors["max_abs_error"] < bound * errors["max_abs_reference"]
    assert status == "failed" and "an element's error is" in message


def test_tf32_sized_errors_pass_the_tf32_bound_but_not_fp32s(cpu):
    a, b = cpu.inputs([(128, 512), (512, 128)], seed=7)
    # Round the inputs to TF32 (10 explicit mantissa bits), as the tensor cores do.
    tf32 = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)  # noqa: E731
    c = tf32(a) @ tf32(b)
    assert checked(cpu, a, b, c, "tf32")[0] == "ok"
    assert checked(cpu, a, b, c, "fp32")[0] == "failed"


def test_a_tensor_cores_truncating_accumulation_passes_the_bf16_bound(cpu):
    """BF16 operands, their products summed exactly 16 at a time (one MMA's k) and each sum added to an FP32
    accumulator rounded toward zero, as tensor cores align and cut: the error grows linearly with k, and the bf16
    bound (k/8 units of accumulation) holds it."""
    a, b = (devices.widened(np, x) for x in cpu.inputs([(64, 4096), (4096, 64)], 9, "bf16"))
    c = np.zeros((64, 64), dtype=np.float32)
    for p in range(0, a.shape[1], 16):
        exact = c.astype(np.float64) + a[:, p:p + 16] @ b[p:p + 16, :]
        nearest = exact.astype(np.float32)
        c = np.where(np.abs(nearest) > np.abs(exact), np.nextafter(nearest, np.float32(0)), nearest)
    assert checked(cpu, a, b, c, "bf16")[0] == "ok"


H100_LIKE = {"device": "cuda", "peak_tflops": {"fp32": 60.0, "tf32": 500.0}, "copy_bandwidth_gbps": 3000.0,
             "l2_bytes": 50 << 20}  # round made-up facts of a GPU, not a measurement


def gemm_cost(m, n, k):
    return 2.0 * m * n * k, 4 * (m * k + k * n + m * n)


@pytest.mark.parametrize("shape, tflops, gbps, mode, cache, refused", [
    ((4096, 4096, 4096), 59, None, "fp32", "hot", None),  # just under the peak
    ((4096, 4096, 4096), 70, None, "fp32", "hot", "above the device's fp32 peak"),  # a launch the events missed
    ((4096, 4096, 4096), 70, None, "tf32", "hot", None),  # tensor cores' peak is higher
    ((8192, 8192, 16), None, 5000, "tf32", "hot", "measured copy bandwidth"),  # 270 MB cannot come from L2
    ((8192, 8192, 16), None, 3500, "tf32", "hot", None),  # within the datasheet's margin over a copy
    ((1024, 1024, 16), None, 5000, "tf32", "hot", None),  # 4 MB sit in L2: beyond DRAM's rate is possible
    ((1024, 1024, 16), None, 5000, "tf32", "cold", "measured copy bandwidth"),  # unless L2 is flushed
])
def test_a_timing_beyond_the_devices_peak_or_memory_is_refused(shape, tflops, gbps, mode, cache, refused):
    flops, min_bytes = gemm_cost(*shape)
    seconds = flops / (tflops * 1e12) if tflops else min_bytes / (gbps * 1e9)
    reason = checking.implausible(flops, min_bytes, seconds, H100_LIKE, mode, cache)
    assert (reason is None) if refused is None else (refused in reason)


def test_cpu_timings_are_not_held_to_gpu_limits():
    cpu_facts = {"device": "cpu", "peak_tflops": {}, "copy_bandwidth_gbps": 20.0}
    assert checking.implausible(2.0 * 1024**3, 4 * 3 * 1024**2, 1e-6, cpu_facts, "fp32", "cold") is None
