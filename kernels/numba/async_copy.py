"""cp.async from Numba kernels: the copies that CUDA C rungs 10–13 feed shared memory with, as Numba intrinsics.

Numba has no cp.async, but a Python kernel can emit inline PTX through an intrinsic (`numba.core.extending`), which
lowers a call to LLVM IR of our own: here an `InlineAsm` call on the element addresses of a shared and a global
array. A copy of 4 bytes with a source size of 0 zero-fills its element (the edges of the matrices). Under Numba's
CUDA simulator (NUMBA_ENABLE_CUDASIM), which runs kernels as Python and knows no intrinsics, the same functions
copy at once and wait for nothing.
"""
from numba import config

if config.ENABLE_CUDASIM:
    def copy4(dst, d0, d1, src, s0, s1, inside):
        """dst[d0, d1] = src[s0, s1] where `inside`, else 0; asynchronously (wait_group)."""
        dst[d0, d1] = src[s0, s1] if inside else 0.0

    def commit():
        """Closes this thread's group of copies issued since the last commit."""

    def wait(pending):
        """Until at most `pending` (a constant) of this thread's committed groups are still in flight."""

else:
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.core.extending import intrinsic

    def _asm(builder, text: str, constraints: str, args: list) -> None:
        kind = ir.FunctionType(ir.VoidType(), [a.type for a in args])
        builder.call(ir.InlineAsm(kind, text, constraints, side_effect=True), args)

    @intrinsic
    def copy4(typingctx, dst, d0, d1, src, s0, s1, inside):
        """dst[d0, d1] = src[s0, s1] where `inside`, else 0, by one 4-byte cp.async (cached in L1: `ca`); outside,
        the source is src[0, 0] with a source size of 0, so nothing is read."""
        def codegen(context, builder, signature, args):
            dst_t, _, _, src_t = signature.args[:4]
            dst_a, i0, i1, src_a, j0, j1, keep = args
            target = cgutils.get_item_pointer(context, builder, dst_t, context.make_array(dst_t)(
                context, builder, dst_a), [i0, i1])
            zero = ir.Constant(j0.type, 0)
            j0 = builder.select(keep, j0, zero)
            j1 = builder.select(keep, j1, ir.Constant(j1.type, 0))
            source = cgutils.get_item_pointer(context, builder, src_t, context.make_array(src_t)(
                context, builder, src_a), [j0, j1])
            size = builder.select(keep, ir.Constant(ir.IntType(32), 4), ir.Constant(ir.IntType(32), 0))
            _asm(builder, "{ .reg .u64 s; cvta.to.shared.u64 s, $0; cp.async.ca.shared.global [s], [$1], 4, $2; }",
                 "l,l,r", [target, source, size])
            return context.get_dummy_value()

        if not isinstance(inside, types.Boolean):
            return None
        return types.void(dst, d0, d1, src, s0, s1, inside), codegen

    @intrinsic
    def commit(typingctx):
        """Closes this thread's group of copies issued since the last commit."""
        def codegen(context, builder, signature, args):
            _asm(builder, "cp.async.commit_group;", "", [])
            return context.get_dummy_value()

        return types.void(), codegen

    @intrinsic
    def wait(typingctx, pending):
        """Until at most `pending` (a compile-time constant) of this thread's committed groups are in flight."""
        if not isinstance(pending, types.IntegerLiteral):
            return None

        def codegen(context, builder, signature, args):
            _asm(builder, f"cp.async.wait_group {pending.literal_value};", "", [])
            return context.get_dummy_value()

        return types.void(pending), codegen
