"""What a tree-packing run will build, known from the instance before anything is packed.

Zhao et al. ("ForestColl", arXiv 2402.06787, Sections 4-5) send every root's data down
spanning out-trees whose arcs are routes through the network; the producer emits each route
hop of each pipeline piece as one send (:func:`collsynth.solvers.packing.emission.emit`). A
switch that does not copy forwards one arrival per send, so a tree reaches participant ``v``
over a route of at least ``L_v`` hops, ``L_v`` the fewest hops from any other participant to
``v`` (counted exactly up to two hops, as three beyond). Whatever the trees, one piece per chunk therefore costs at least

    sends >= chunks_per_node * sum over roots r of sum over participants v != r of L_v

per forest (allreduce has two: its reduce-scatter and its allgather), and ``p`` pieces ``p``
times that. :func:`least_sends` counts it from the adjacency in linear time,
:func:`check` refuses before packing when even one piece would not fit the memory budget
(naming the topology field that sets the size). The automatic pipeline depth
(:func:`collsynth.solvers.packing.emission.auto_pieces`) is capped to what fits, so a depth
the user did not ask for is never what is refused.

Kept as trees plus the pipeline rule (:mod:`collsynth.tens.pipelined_trees`), a schedule
lists the route hops of the trees of one root per orbit of the box shifts, at least one
root's: :func:`least_listed_hops`. :func:`planned` is what the run's size check counts before
anything runs (:func:`collsynth.instances.size.check_run`), in the form the run will keep.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ...instances import Instance
from ...instances.size import BYTES_PER_SEND, Build, topology_field
from ...limits import human_bytes, require
from .emission import PIECES_FLOOR

CAP = 3  # hops counted exactly up to 2; a participant farther from every other counts 3 (a lower bound)
FORESTS = {"allgather": 1, "reduce_scatter": 1, "broadcast": 1, "reduce": 1, "allreduce": 2}


def least_hops_in(instance: Instance) -> np.ndarray:
    """``L_v`` per participant (in the collective's node order), capped at :data:`CAP`: the
    fewest hops from any other participant to it (module doc), from two sparse products of
    the adjacency (linear in the links, no all-pairs distances). Zero for a lone participant.

    >>> from collsynth.instances import make_instance
    >>> from collsynth.instances.generators import build
    >>> inst = make_instance(build("dgx_h100", {"nodes": 2}), "allgather")
    >>> least_hops_in(inst)[:3].tolist()  # every GPU pair meets at NVSwitch or a rail: 2 hops
    [2, 2, 2]
    """
    nodes = np.asarray(instance.collective.nodes, dtype=np.int64)
    if len(nodes) < 2:
        return np.zeros(len(nodes), np.int64)
    la = instance.topology.link_arrays
    n = instance.topology.size
    adj = sp.csr_matrix((np.ones(len(la)), (la.src, la.dst)), shape=(n, n))
    part = np.zeros(n)
    part[nodes] = 1.0
    one = adj.T @ part  # participants one hop before v
    two = adj.T @ (adj.T @ part) - part * np.asarray(adj.multiply(adj.T).sum(axis=1)).ravel()  # not from v itself
    hops = np.where(one[nodes] > 0, 1, np.where(two[nodes] > 0.5, 2, CAP))
    return hops.astype(np.int64)


def least_sends(instance: Instance) -> int:
    """The fewest sends a tree-packing schedule of ``instance`` has at one pipeline piece per
    chunk (module doc): per forest, chunks per node times, over roots, the least route hops into
    every other participant.

    >>> from collsynth.instances import make_instance
    >>> from collsynth.instances.generators import build
    >>> least_sends(make_instance(build("dgx_h100", {"nodes": 2}), "allgather"))  # 16 x 15 x 2
    480
    """
    coll = instance.collective
    hops = least_hops_in(instance)
    if coll.kind in ("broadcast", "reduce"):  # one root reaches every other participant
        total = int(hops.sum()) - int(hops[list(coll.nodes).index(coll.root)])
    else:  # every participant is a root reaching the others: sum over r of (sum - L_r)
        total = (len(hops) - 1) * int(hops.sum())
    return FORESTS.get(coll.kind, 1) * coll.chunks_per_node * total


def check(instance: Instance) -> int:
    """Refuse (:class:`collsynth.limits.TooBig`, before any packing) an instance whose
    tree-packing schedule would exceed the memory budget at one piece per chunk; the error
    names the topology field that sets the size (:func:`planned`). Returns :func:`least_sends`."""
    build = planned(instance, compact=False)
    require(build.bytes, build.field, build.what)
    return build.bytes // BYTES_PER_SEND


def least_listed_hops(instance: Instance) -> int:
    """The fewest route hops a schedule kept as trees plus the pipeline rule lists: the trees
    of at least one root per forest, reaching every other participant ``v`` over at least
    ``L_v`` hops (:func:`least_hops_in`), whatever the symmetry (every root in one orbit at best).

    >>> from collsynth.instances import make_instance
    >>> from collsynth.instances.generators import build
    >>> least_listed_hops(make_instance(build("dgx_h100", {"nodes": 2}), "allgather"))  # 15 others x 2
    30
    """
    hops = least_hops_in(instance)
    return FORESTS.get(instance.collective.kind, 1) * int(hops.sum() - hops.max()) if len(hops) else 0


def expected_pieces(instance: Instance) -> int:
    """Pipeline pieces a chunk that a run at its default settings is expected to cut, for the
    choice to compile its kernels (:attr:`collsynth.instances.size.Build.sends`): the automatic
    depth's floor (:data:`.emission.PIECES_FLOOR`) on links without latency, else the ``P`` of
    least ``(P + D - 1) (alpha + s / P)``, ``sqrt((D - 1) s / alpha)`` (``D`` the most route hops
    into a participant, at least 2; ``s`` a chunk's time on the slowest link; the pipelined
    broadcast's time, Patarasuk, Yuan and Faraj, J. Parallel Distrib. Comput. 68(6), 2008), at
    most that floor. An estimate, not a bound: the run picks its pieces from its trees
    (:func:`.emission.auto_pieces`).

    >>> from collsynth.instances import make_instance
    >>> from collsynth.instances.generators import build
    >>> expected_pieces(make_instance(build("switch", {"nodes": 4}, bandwidth=1e11, alpha=0.0), "allgather"))
    1600
    >>> [expected_pieces(make_instance(build("switch", {"nodes": 4}, bandwidth=1e11, alpha=1e-6), "allgather",
    ...                                message_bytes=m)) for m in (4096, 1 << 30)]
    [1, 52]
    """
    la = instance.topology.link_arrays
    alpha = float(la.alpha.max()) if len(la) else 0.0
    if alpha <= 0:
        return PIECES_FLOOR
    seconds = instance.collective.chunk_bytes / float(la.bandwidth.min())
    hops = least_hops_in(instance)
    depth = max(2, int(hops.max()) if len(hops) else 0)
    return max(1, min(PIECES_FLOOR, round(math.sqrt((depth - 1) * seconds / alpha))))


def planned(instance: Instance, compact: bool, asked: bool = False) -> Build:
    """What a tree-packing run of ``instance`` builds at least (the size check before the run,
    :func:`collsynth.instances.size.check_run`): with ``compact``, the listed hops of the trees
    (:func:`least_listed_hops`); else the explicit sends at one pipeline piece per chunk
    (:func:`least_sends`), refused at ``--param form`` when the user ``asked`` for them (else at
    the topology field), naming ``form=compact`` where it applies. ``BYTES_PER_SEND`` per send
    or listed hop.

    >>> from collsynth.instances import make_instance
    >>> from collsynth.instances.generators import build
    >>> inst = make_instance(build("dgx_h100", {"nodes": 2}), "allgather")
    >>> planned(inst, True).bytes // BYTES_PER_SEND, planned(inst, False, asked=True).field
    (30, '--param form')
    """
    coll, field = instance.collective, topology_field(instance.topology)
    if compact:
        hops = least_listed_hops(instance)
        return Build(hops * BYTES_PER_SEND, f"tree-packing's trees on {len(coll.nodes):,} GPUs kept as trees (at least "
                                            f"{hops:,} listed route hops, {human_bytes(BYTES_PER_SEND)} each)", field)
    sends = least_sends(instance)
    hint = "; --param form=compact keeps the trees as trees"
    return Build(sends * BYTES_PER_SEND,
                 f"tree-packing's explicit schedule on {len(coll.nodes):,} GPUs ({coll.kind}: at least {sends:,} sends "
                 f"at one pipeline piece per chunk, {human_bytes(BYTES_PER_SEND)} each{hint})",
                 "--param form" if asked else field, sends=sends * expected_pieces(instance))
