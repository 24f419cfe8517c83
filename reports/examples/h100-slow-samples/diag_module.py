import itertools, cupy
x = cupy.zeros(1, dtype=cupy.float32)
for i in itertools.count():
    k = cupy.RawKernel('extern "C" __global__ void f%d(float* x) { x[0] = %d; }' % (i, i), "f%d" % i)
    k((1,), (1,), (x,))
