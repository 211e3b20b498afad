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

The other hint, :func:`huge_pages`, asks Linux to back a fresh array with transparent huge pages
(``madvise(MADV_HUGEPAGE)``, the system's ``transparent_hugepage`` setting ``madvise`` or
``always``). numpy does so for its own arrays of 4 MiB and more; numba's allocator does not, so
a kernel filling an array of hundreds of MiB takes a page fault every 4 KiB (a few microseconds
each in a virtual machine: 0.8 s against 0.14 s to fill 512 MiB on the machine these kernels
were measured on) and its scattered reads miss the TLB on every page. Advise before the first
write: a page already touched stays small.

>>> @njit
... def squares(n):
...     a = np.empty(n, np.int64)
...     huge_pages(a)
...     for i in range(n):
...         a[i] = i * i
...     return a
>>> squares(5).tolist()
[0, 1, 4, 9, 16]
"""

from __future__ import annotations

import sys

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


def _prefetch_intrinsic(name: str, write: int, purpose: str):
    """The intrinsic ``name(arr, index)`` prefetching the cache line of ``arr[index]`` for ``purpose``."""
    def typer(typingctx, arr, index):
        if not isinstance(arr, types.Array) or not isinstance(index, types.Integer):
            return None
        return types.void(arr, index), _prefetch_codegen(write)

    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = (f"Bring the cache line of ``arr[index]`` (of a 2-d array: the start of row "
                     f"``index``) in for {purpose}.")
    return intrinsic(typer)


prefetch = _prefetch_intrinsic("prefetch", 0, "reading")
prefetch_write = _prefetch_intrinsic("prefetch_write", 1, "writing")


MADV_HUGEPAGE = 14  # Linux's madvise advice (asm-generic/mman-common.h)
PAGE = 4096


def _huge_pages_codegen(context, builder, signature, args):
    """``madvise(first whole page, whole pages, MADV_HUGEPAGE)`` over the array's data, on
    Linux; nothing elsewhere, or when the array spans no whole page."""
    if not sys.platform.startswith("linux"):
        return context.get_dummy_value()
    aty = signature.args[0]
    ary = context.make_array(aty)(context, builder, args[0])
    i64 = ir.IntType(64)
    i8p = ir.IntType(8).as_pointer()
    itemsize = context.get_abi_sizeof(context.get_data_type(aty.dtype))
    start = builder.ptrtoint(ary.data, i64)
    end = builder.add(start, builder.mul(ary.nitems, i64(itemsize)))
    mask = i64(-PAGE)
    lo = builder.and_(builder.add(start, i64(PAGE - 1)), mask)
    hi = builder.and_(end, mask)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [i8p, i64, ir.IntType(32)]),
                                        "madvise")
    with builder.if_then(builder.icmp_unsigned(">", hi, lo)):
        builder.call(fn, [builder.inttoptr(lo, i8p), builder.sub(hi, lo), ir.IntType(32)(MADV_HUGEPAGE)])
    return context.get_dummy_value()


@intrinsic
def huge_pages(typingctx, arr):
    """Advise the kernel to back the whole pages of a fresh C-contiguous array's data with
    transparent huge pages (see the module doc); a hint: the result is ignored."""
    if not isinstance(arr, types.Array) or arr.layout != "C":
        return None
    return types.void(arr), _huge_pages_codegen
