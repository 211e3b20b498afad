"""Software prefetch for the compiled loops: LLVM's ``llvm.prefetch`` intrinsic reached from
numba (``numba.extending.intrinsic``).

A loop that walks one array in order but reads or writes another at scattered places (a
permutation, a queue's positions) waits for one cache miss at a time unless it asks for the
lines it will need some iterations ahead. A prefetch is only a hint: nothing waits for it, so
it never holds up the instructions behind it the way a load read early does, and it cannot
fault, so a hint past an array's end is harmless.

>>> import numpy as np
>>> from numba import njit
>>> @njit
... def scattered_sum(a, idx):
...     total = 0.0
...     for k in range(len(idx)):
...         if k + 8 < len(idx):
...             prefetch(a, idx[k + 8])
...         total += a[idx[k]]
...     return total
>>> float(scattered_sum(np.arange(10.0), np.array([9, 0, 3, 3])))
15.0
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _prefetch_codegen(write: int):
    def codegen(context, builder, signature, args):
        aty, ity = signature.args
        ary = context.make_array(aty)(context, builder, args[0])
        at = [context.cast(builder, args[1], ity, types.intp)] + [context.get_constant(types.intp, 0)] * (aty.ndim - 1)
        ptr = cgutils.get_item_pointer(context, builder, aty, ary, at, wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(write), i32(3), i32(1)])  # high locality, data
        return context.get_dummy_value()

    return codegen


@intrinsic
def prefetch(typingctx, arr, index):
    """Bring the cache line of ``arr[index]`` (of a 2-d array: the start of row ``index``) in
    for reading."""
    if not isinstance(arr, types.Array) or not isinstance(index, types.Integer):
        return None
    return types.void(arr, index), _prefetch_codegen(0)


@intrinsic
def prefetch_write(typingctx, arr, index):
    """Bring the cache line of ``arr[index]`` (of a 2-d array: the start of row ``index``) in
    for writing."""
    if not isinstance(arr, types.Array) or not isinstance(index, types.Integer):
        return None
    return types.void(arr, index), _prefetch_codegen(1)
