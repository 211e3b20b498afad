"""Kernels run as plain Python while numba's cache lacks them: work too small to repay a compile.

Compiling the numba kernels costs about 80 s of CPU once per machine (numba's on-disk cache keeps
them after that), while a small run (a few thousand sends) executes them in a fraction of a
second even as plain Python. While :func:`interpreting` is on, a kernel called from Python that
numba would have to *compile* (its signature neither in memory nor in the on-disk cache) runs its
Python source instead (``py_func``, with every kernel it calls also as Python) on the same
arrays; a kernel already compiled or in the cache runs compiled. The results are the same
(``tests/test_interpreted.py`` compares the two with hypothesis on random small inputs): the
kernels are written in numba's subset of Python, whose integer and float arithmetic on numpy
scalars is numpy's. What numba supplies and Python lacks is stood in for: the prefetch and huge
page hints do nothing, a count of trailing zeros is computed, records read from a structured
array are numpy records (field access by attribute, fields first) and numpy scalar results are
returned as Python numbers, as numba returns them.

How it works: numba fires its ``numba:compile`` event only when it is about to compile (a load
from the cache does not); while interpreting, a listener refuses that compile, and the call
(through the dispatcher's ``_compile_for_args``, which numba's C dispatcher calls on a signature
it has not got) runs the Python twin instead.

>>> import numpy as np
>>> from numba import njit
>>> @njit
... def total(a):
...     s = 0
...     for x in a:
...         s += x
...     return s
>>> with interpreting():
...     int(total(np.arange(5)))
10
>>> len(total.signatures)  # nothing was compiled
0
"""

from __future__ import annotations

import contextlib
import types

import numba
import numpy as np
from numba.core import event
from numba.core.dispatcher import Dispatcher
from numba.cpython.unsafe.numbers import trailing_zeros

from .prefetch import huge_pages, prefetch, prefetch_write

_on = [0]  # nesting depth of interpreting(); a process-wide switch (runs are one per process at a time)
_twins: dict[Dispatcher, types.FunctionType] = {}  # a kernel's twin, made once


class _WouldCompile(Exception):
    """Raised at numba's compile event while interpreting: the call runs its Python twin."""


class _RefuseCompile(event.Listener):
    def on_start(self, ev) -> None:  # noqa: D102 - numba's Listener interface
        if _on[0]:
            raise _WouldCompile()

    def on_end(self, ev) -> None:  # noqa: D102
        pass


_LISTENER = _RefuseCompile()
event.register("numba:compile", _LISTENER)


def refusing() -> bool:
    """Whether a compile starting now is refused (:func:`interpreting` is on): listeners of
    numba's compile event ask this, so that what they do does not depend on their order."""
    return bool(_on[0])


def _nothing(*args) -> None:
    """A hint (prefetch, huge pages) as Python: nothing to do."""


def _trailing_zeros(x) -> np.uint64:
    """Index of the lowest set bit of ``x`` (non-zero), as numba's ``trailing_zeros``."""
    v = int(x)
    return np.uint64((v & -v).bit_length() - 1)


_STAND_INS = {id(trailing_zeros): _trailing_zeros, id(prefetch): _nothing, id(prefetch_write): _nothing,
              id(huge_pages): _nothing}


class _Record(np.record):
    """A numpy record whose fields come before numpy's own attributes (a field ``nbytes`` is the
    field, not the record's size), as numba reads ``rec[i].field``."""

    __slots__ = ()

    def __getattribute__(self, attr):
        fields = np.void.__getattribute__(self, "dtype").fields
        if fields is not None and attr in fields:
            return self.getfield(*fields[attr][:2])
        return np.record.__getattribute__(self, attr)


def _as_records(value):
    """A structured array (or dtype) as one whose items are :class:`_Record` (``rec[i].field``
    reads and writes the array, as compiled); any other value as it is."""
    if isinstance(value, np.ndarray) and value.dtype.names is not None and value.dtype.type is not _Record:
        return value.view(np.dtype((_Record, value.dtype)))
    if isinstance(value, np.dtype) and value.names is not None and value.type is not _Record:
        return np.dtype((_Record, value))
    return value


def _boxed(value):
    """A kernel's result as numba returns it to Python: numpy scalars as Python numbers."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return tuple(_boxed(v) for v in value)
    return value


def twin(kernel: Dispatcher) -> types.FunctionType:
    """The Python function of ``kernel`` whose calls of other kernels are their twins too (and
    numba's intrinsics their stand-ins): it computes what the compiled kernel computes."""
    found = _twins.get(kernel)
    if found is not None:
        return found
    f = kernel.py_func
    if f.__closure__:
        raise TypeError(f"{f.__qualname__}: a kernel with a closure has no Python twin here")
    scope = dict(f.__globals__)
    made = types.FunctionType(f.__code__, scope, f.__name__, f.__defaults__)
    made.__qualname__, made.__kwdefaults__ = f.__qualname__, f.__kwdefaults__
    _twins[kernel] = made  # before the callees: kernels that call each other
    for name, value in list(scope.items()):
        if isinstance(value, Dispatcher):
            scope[name] = twin(value)
        elif id(value) in _STAND_INS:
            scope[name] = _STAND_INS[id(value)]
        else:
            scope[name] = _as_records(value)
    return made


def _compile_or_interpret(self, *args, **kws):
    """numba's ``Dispatcher._compile_for_args`` (what its C dispatcher calls for a signature it
    has not got, to get the function to call), except that a compile refused while
    :func:`interpreting` gives the kernel's twin."""
    try:
        return _compile_for_args(self, *args, **kws)
    except _WouldCompile:
        python = twin(self)

        def run(*a):
            with np.errstate(over="ignore"):  # machine integers wrap, as compiled
                return _boxed(python(*[_as_records(x) for x in a]))

        return run


try:
    _compile_for_args = Dispatcher._compile_for_args
except AttributeError:  # tests/test_interpreted.py guards every internal this module relies on
    raise ImportError(f"numba {numba.__version__} has no Dispatcher._compile_for_args, which "
                      "collsynth.tens.interpreted replaces (pyproject.toml pins the numba it was written for)") from None
Dispatcher._compile_for_args = _compile_or_interpret


@contextlib.contextmanager
def interpreting(on: bool = True):
    """While the block runs (and ``on``), kernels numba would compile run as Python instead
    (see the module doc)."""
    if not on:
        yield
        return
    _on[0] += 1
    try:
        yield
    finally:
        _on[0] -= 1
