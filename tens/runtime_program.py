"""An MSCCL program as the runtime cost model sees it: thread blocks, their steps, the
connections they use and what one loop iteration loads on every link.

The MSCCL runtime (Azure/msccl-executor-nccl ``src/device/msccl_kernel_impl.h``; Cowan et
al., "MSCCLang: Microsoft Collective Communication Language", ASPLOS 2023, Sections 4-5)
launches one CUDA thread block per ``<tb>`` of a GPU; a thread block has at most one send
peer and one receive peer on one channel (a connection each way) and executes its steps in
order, a receive waiting for the matching send (the k-th send on a (source, destination,
channel) connection feeds the k-th receive on it) and a step with ``depid``/``deps`` waiting
for that step of another thread block. The buffer is processed in loop iterations: each of
the program's ``nchunksperloop`` chunks is cut into pieces of at most
``buff_bytes / NCCL_STEPS * MSCCL_CHUNKSTEPS`` bytes (``msccl.h``:
``MSCCL_CHUNKSTEPS = NCCL_STEPS / 2``, ``stepSize = buffSize / NCCL_STEPS``), and every thread
block runs all its steps once per iteration; a step of ``cnt`` k is as many calls as the
connection's buffer needs (:func:`collsynth.tens.cost_models.runtime.call_counts`).

:func:`program_features` reduces a program on an instance to the numbers the model prices
with, per slice byte: each thread block's step count and the chunks it sends; each directed
link's load per iteration (a send between two ranks loads every link of its route on the
topology, the GPU's own NIC for inter-box traffic on the rail-per-GPU systems; the link class
is the edge's ``link_class``); and one critical path of an iteration through the dependency
graph (steps, chunks sent, hops per link class), picked by longest path with unit step costs
plus the route latencies in microseconds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from .. import InputError
from ..instances.instance import Instance
from .msccl_format import RECV_TYPES, REDUCE_TYPES, SEND_TYPES
from .msccl_read import algo_root
from .runtime_kernels import chain_finish, compressed_rows, heaviest_path, step_levels

__all__ = ["ProgramFeatures", "Rounds", "program_features", "link_classes", "step_rounds", "pipelined_copies",
           "carried_rounds", "thread_block_links", "copy_crowds"]

DEFAULT_CLASS = "link"


@dataclass(frozen=True)
class Rounds:
    """One iteration of a program in rounds: ``load`` (link class -> per round, the largest load
    of a link of that class, as ``ProgramFeatures.class_load``), ``sent``/``reduced`` (round x
    thread block: chunks sent / reduced; from :func:`program_features`, one column per distinct
    pair of the two columns, in no particular order: what the model reads of them is the
    busiest thread block of each round)."""

    load: dict
    sent: np.ndarray
    reduced: np.ndarray


@dataclass(frozen=True)
class ProgramFeatures:
    """What the runtime model needs of one program on one instance (see the module doc).

    ``tb_steps[i]``, ``tb_sent[i]``: steps and chunks copied across a link (sum of ``cnt``; the
    sender's copy, or the receiver's on a ``"read"`` transport: :func:`_copies`) per iteration by
    thread block ``i``; ``tbs_per_gpu``: the most thread blocks of one GPU. ``class_load``:
    link class -> the largest per-iteration load of a link of that class, in chunks per
    byte/s of the link's bandwidth. ``path_steps``, ``path_sent``, ``path_reduced``, ``path_hops`` (class ->
    hops): the critical path of one iteration. ``nchunksperloop``, ``max_cnt``, ``proto``,
    ``coll``: the program's attributes. ``path_copies``: the chunks copied one after another on
    the slowest chain of one iteration when a forward trails its sender by half a chunk and by
    a whole one (:func:`pipelined_copies` at slice shares 0.5 and 1; empty: not computed, the
    chain is then ``path_sent`` copies each a slice behind). ``rounds``: one iteration cut
    into the rounds of :func:`step_rounds`, twice (a forwarding receive in its sender's round,
    then one round later), each a :class:`Rounds`. ``cnts``: the distinct ``cnt`` values of the program's steps;
    ``tb_steps``, ``tb_hops[c]`` and ``gpu_ops[c]`` have one column per value (a vector when the
    program has only ``cnt="1"``), since the runtime runs a step of ``cnt`` k as ``ceil(k / m)``
    calls, ``m`` set per message size (:func:`~collsynth.tens.cost_models.runtime.runtime_times`).
    ``carried``: for each of the two roundings of ``rounds``, the share of an iteration's
    rounds after which the next iteration starts in the steady state
    (:func:`carried_rounds` over the number of rounds); empty where every thread block lets
    the next iteration start one round after the previous (the period is then the busiest
    thread block's or link's load, which the model already takes). ``link_load`` (class -> per
    loaded link of that class, chunks per byte/s as ``class_load``, whose largest it is) and
    ``link_ops`` (class -> the sends crossing each of those links per iteration, one column per
    ``cnts`` value as ``gpu_ops``): what each link carries, for the cost a link pays per slice
    (:func:`~collsynth.tens.cost_models.runtime.port_times`); empty: not computed (the busiest
    link's ``class_load`` alone). ``tb_links``: link class -> per thread block, the largest
    per-iteration load (as ``class_load``) of a link of that class that its sends cross (0 where
    it sends over none), which the thread block's transfers share (:func:`thread_block_links`;
    empty: not computed). ``path_crowd``: link class -> the most connections per byte/s of a
    link's bandwidth that a copy of the critical path crosses (:func:`copy_crowds`): what a
    link shared fairly between its connections lets one connection's copy run at; empty: not
    computed. ``tb_order``: per thread block, how many thread blocks of its GPU have a lower
    id (the CUDA block it runs as comes in that order, :func:`block_order`); empty: not
    computed."""

    tb_steps: np.ndarray
    tb_sent: np.ndarray
    tb_reduced: np.ndarray
    tb_hops: dict
    gpu_ops: dict
    tbs_per_gpu: int
    class_load: dict
    path_steps: int
    path_sent: int
    path_reduced: int
    path_hops: dict
    nchunksperloop: int
    max_cnt: int
    proto: str
    coll: str
    rounds: tuple = ()
    cnts: tuple = (1,)
    path_copies: tuple = ()
    carried: tuple = ()
    link_load: dict = field(default_factory=dict)
    link_ops: dict = field(default_factory=dict)
    tb_links: dict = field(default_factory=dict)
    path_crowd: dict = field(default_factory=dict)
    tb_order: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def link_classes(instance: Instance) -> np.ndarray:
    """The link class of every directed pair of ``instance.topology.link_arrays`` (the edges'
    ``link_class``; ``"link"`` where the topology names none)."""
    topo = instance.topology
    la = topo.link_arrays
    cls = {(u, v): d.get("link_class", DEFAULT_CLASS) for u, v, d in topo.graph.edges(data=True)}
    return np.array([cls.get((int(u), int(v)), DEFAULT_CLASS) for u, v in zip(la.src, la.dst)], dtype=object)


def endpoint_links(src: np.ndarray, dst: np.ndarray, instance: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(first, hop_send, hop_link)``: the first link each send ``src[i] -> dst[i]`` loads, and
    every link it loads as pairs (send ``hop_send[j]`` loads link ``hop_link[j]``). The route:

    - the direct link when there is one;
    - else a path over direct GPU-to-GPU links when the two GPUs have one, the widest (most
      bandwidth on its narrowest link), then fewest hops. Between two MI250 GCDs that no xGMI
      link joins RCCL 2.18.3 connects P2P directly (TE-CCL's ``amd_32`` log: "via P2P/IPC",
      never "P2P/indirect"), the sender writing into the peer's memory, and the GCDs' hive
      carries it over xGMI through the GCDs between them: ROCm SMI ``rsmi_topo_get_link_type``
      reports every GCD pair of a hive as an xGMI link with a hop count (ROCm/rccl
      ``src/misc/rocm_smi_wrap.cc`` keeps the one-hop ones, weight 15, as its topology's
      links), and an older RCCL's ``ncclTopoSetXgmi`` (``src/graph/paths.cc``) traversed "XGMI
      links (including multi-GPU hops) ... how XGMI hardware operates". Which of several
      equally wide paths the hardware takes is not documented; fewest hops is assumed;
    - else the source's link into a switch the destination hears from and that switch's link
      to the destination (two GPUs of one box behind their NVSwitch);
    - else the source's link into a switch of its own (its NIC: a switch only it attaches to)
      and the destination's link out of one of its own, the fabric between such NICs taken as
      non-blocking;
    - else the fewest-hop path through switches only (a NIC two GCDs share, the fabric switch,
      the peer's NIC: the shared NIC's port to the fabric carries both GCDs' traffic).

    Each GPU uses its own NIC (no PXN). Raises :class:`~collsynth.InputError` for a pair with
    no such links."""
    topo = instance.topology
    la = topo.link_arrays
    switches = set(topo.switches)
    out_sw, in_sw = defaultdict(dict), defaultdict(dict)
    gpu_links, fabric = nx.DiGraph(), nx.DiGraph()
    for k, (u, v) in enumerate(zip(la.src.tolist(), la.dst.tolist())):
        if v in switches:
            out_sw[u][v] = k
        if u in switches:
            in_sw[v][u] = k
        if u not in switches and v not in switches:
            gpu_links.add_edge(u, v, link=k, bandwidth=float(la.bandwidth[k]))
        if u in switches and v in switches:
            fabric.add_edge(u, v, link=k)
    npus_of = defaultdict(set)
    for u, v in zip(la.src.tolist(), la.dst.tolist()):
        if v in switches and u not in switches:
            npus_of[v].add(u)
        if u in switches and v not in switches:
            npus_of[u].add(v)
    own = {w for w, npus in npus_of.items() if len(npus) == 1}
    memo, first, hop_send, hop_link = {}, [], [], []
    for i, (u, v) in enumerate(zip(src.tolist(), dst.tolist())):
        if (u, v) not in memo:
            memo[(u, v)] = _pair_links(u, v, la, gpu_links, fabric, out_sw, in_sw, own)
        links = memo[(u, v)]
        first.append(links[0])
        hop_send += [i] * len(links)
        hop_link += links
    return (np.array(first, dtype=np.int64), np.array(hop_send, dtype=np.int64),
            np.array(hop_link, dtype=np.int64))


def widest_gpu_path(gpu_links: nx.DiGraph, u: int, v: int) -> list[int] | None:
    """The links (``link`` attributes) of the path from ``u`` to ``v`` over ``gpu_links`` whose
    narrowest link is widest, fewest hops among those (networkx's shortest path), or None.

    >>> g = nx.DiGraph()
    >>> g.add_edge(0, 1, link=0, bandwidth=1.0); g.add_edge(1, 2, link=1, bandwidth=1.0)
    >>> g.add_edge(0, 3, link=2, bandwidth=4.0); g.add_edge(3, 4, link=3, bandwidth=2.0)
    >>> g.add_edge(4, 2, link=4, bandwidth=2.0)
    >>> widest_gpu_path(g, 0, 2), widest_gpu_path(g, 2, 0)
    ([2, 3, 4], None)
    """
    if u not in gpu_links or v not in gpu_links:
        return None
    for width in sorted({b for _, _, b in gpu_links.edges(data="bandwidth")}, reverse=True):
        wide = nx.subgraph_view(gpu_links, filter_edge=lambda a, b, w=width: gpu_links.edges[a, b]["bandwidth"] >= w)
        if nx.has_path(wide, u, v):
            path = nx.shortest_path(wide, u, v)
            return [gpu_links.edges[a, b]["link"] for a, b in zip(path, path[1:])]
    return None


def _pair_links(u: int, v: int, la, gpu_links: nx.DiGraph, fabric: nx.DiGraph, out_sw: dict, in_sw: dict,
                own: set) -> list[int]:
    """The links a send ``u -> v`` loads, in order (see :func:`endpoint_links`)."""
    direct = int(la.lookup(np.array([u]), np.array([v]))[0])
    if direct >= 0:
        return [direct]
    over_gpus = widest_gpu_path(gpu_links, u, v)
    if over_gpus:
        return over_gpus
    shared = [w for w in out_sw[u] if w in in_sw[v]]
    if shared:
        return [out_sw[u][shared[0]], in_sw[v][shared[0]]]
    own_out = [w for w in out_sw[u] if w in own]
    own_in = [w for w in in_sw[v] if w in own]
    if own_out and own_in:
        return [out_sw[u][own_out[0]], in_sw[v][own_in[0]]]
    over_switches = _switch_path(u, v, fabric, out_sw, in_sw)
    if over_switches is None:
        raise InputError("xml", f"a send from node {u} to node {v}: no link or switch joins them "
                                "on the instance's topology")
    return over_switches


def _switch_path(u: int, v: int, fabric: nx.DiGraph, out_sw: dict, in_sw: dict) -> list[int] | None:
    """The links of the fewest-hop path ``u`` -> switches -> ``v`` (``fabric``: the switch-to-switch
    links, ``link`` attributes), e.g. a GCD's NIC shared with its neighbour, the fabric switch
    and the peer's NIC; None when there is none."""
    best = None
    for w1 in sorted(out_sw[u]):
        reach = nx.single_source_shortest_path(fabric, w1) if w1 in fabric else {w1: [w1]}
        for w2 in sorted(in_sw[v]):
            path = reach.get(w2)
            if path is not None and (best is None or len(path) < len(best)):
                best = path
    if best is None:
        return None
    return ([out_sw[u][best[0]]] + [fabric.edges[a, b]["link"] for a, b in zip(best, best[1:])]
            + [in_sw[v][best[-1]]])


def _steps(root, n: int) -> tuple[list, dict, list]:
    """Steps as ``(gpu, tb, type, cnt, depid, deps)``, thread block info, and tb keys."""
    steps, tb_info, tbs = [], {}, []
    for gpu in root.findall("gpu"):
        g = int(gpu.get("id"))
        for tb in gpu.findall("tb"):
            t = int(tb.get("id"))
            tb_info[(g, t)] = (int(tb.get("send")), int(tb.get("recv")), int(tb.get("chan")), len(steps))
            tbs.append((g, t))
            for st in tb.findall("step"):
                steps.append((g, t, st.get("type"), int(st.get("cnt")), int(st.get("depid")), int(st.get("deps"))))
    return steps, tb_info, tbs


def _dependencies(steps: list, tb_info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges (predecessor step, successor step, whether the edge is a transfer): program order
    in a thread block, explicit ``depid``/``deps``, and each send to the receive it feeds (a
    transfer)."""
    pred, succ = [], []
    sends, recvs = defaultdict(list), defaultdict(list)
    for i, (g, t, typ, _, depid, deps) in enumerate(steps):
        send, recv, chan, first = tb_info[(g, t)]
        if i > first:
            pred.append(i - 1)
            succ.append(i)
        if depid >= 0:
            dep = tb_info.get((g, depid))
            if dep is None:
                raise InputError(f"xml: gpu {g} tb {t}",
                                 f"depends on thread block {depid}, which gpu {g} does not have")
            pred.append(dep[3] + deps)
            succ.append(i)
        if typ in SEND_TYPES:
            sends[(g, send, chan)].append(i)
        if typ in RECV_TYPES:
            recvs[(recv, g, chan)].append(i)
    local = len(pred)
    for conn, s in sends.items():
        r = recvs.get(conn, [])
        if len(r) != len(s):
            raise InputError(f"xml: connection {conn[0]}->{conn[1]} channel {conn[2]}",
                             f"{len(s)} sends but {len(r)} receives")
        pred += s
        succ += r
    transfer = np.arange(len(pred)) >= local
    return np.array(pred, dtype=np.int64), np.array(succ, dtype=np.int64), transfer


def step_rounds(n: int, pred: np.ndarray, succ: np.ndarray, transfer: np.ndarray, forward_wait: np.ndarray) -> np.ndarray:
    """The round of each of ``n`` steps within one loop iteration: the most waits on a chain of
    dependencies into it, where waiting for a step of the same thread block or for a step named
    by ``depid`` counts one (MSCCL signals a dependency when the step has finished, Cowan et
    al., MSCCLang, ASPLOS 2023, Section 5) and a receive is in the round of its send (a
    transfer: ``transfer`` marks those edges), plus ``forward_wait[step]`` (0 or 1) for a
    receive that forwards: it sends what arrived slice by slice, so a chain of forwards is one
    round when a chunk is many slices and one round per hop when it is one slice. Raises
    :class:`~collsynth.InputError` when the dependencies have a cycle.

    >>> edges = np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([True, False, True])
    >>> step_rounds(4, *edges, np.zeros(4, dtype=int)).tolist(), step_rounds(4, *edges, np.ones(4, dtype=int)).tolist()
    ([0, 0, 1, 1], [0, 1, 2, 3])
    """
    order, out_ptr, succ, indeg = compressed_rows(n, pred, succ)
    weight = np.where(transfer[order], forward_wait[succ], 1).astype(np.int64)
    level, seen = step_levels(n, out_ptr, succ, weight, indeg)
    if seen < n:
        raise InputError("xml", "the program's dependencies form a cycle: it would never finish")
    return level


def pipelined_copies(n: int, pred: np.ndarray, succ: np.ndarray, transfer: np.ndarray, copies: np.ndarray,
                     slice_shares=(0.5, 1.0)) -> tuple:
    """When the last of ``n`` steps of one loop iteration finishes, in chunk copy times, at each
    of ``slice_shares`` (a slice's share of a chunk), with
    every step copying ``copies[step]`` chunks (0 for a step that copies nothing across a link)
    and the dependencies ``pred[e] -> succ[e]`` (``transfer[e]``: a send feeding its receive).

    A receive follows its send slice by slice: NCCL's ``genericOp`` (``prims_simple.h``) posts
    each slice of a call once it is copied, so a receive can start a slice's share of its send's
    copy after the send started and ends that share after it. Any other dependency waits for
    the whole step: a thread block runs its steps in order, and MSCCL's interpreter sets a
    step's ``depid`` flag only after all its calls (``msccl_interpreter.h``: ``mscclFlags[bid]``
    is written after the step's last call, when ``has_dependence``). So a chain of forwards
    (``rcs``) costs a slice a hop, and a relay through a receive and a send in two thread blocks
    joined by a ``depid`` (TACCL's programs) a whole chunk. Raises
    :class:`~collsynth.InputError` when the dependencies have a cycle.

    >>> chain = np.array([0, 1]), np.array([1, 2]), np.array([True, True])
    >>> pipelined_copies(3, *chain, np.ones(3))  # s -> rcs -> r: one chunk, then half or whole ones
    (2.0, 3.0)
    >>> relay = np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([True, False, True])
    >>> pipelined_copies(4, *relay, np.array([1.0, 1.0, 0.0, 1.0]))  # s -> r, depid -> s -> r
    (2.5, 3.0)
    """
    order, out_ptr, after, indeg = compressed_rows(n, pred, succ)
    is_transfer, cop = np.asarray(transfer, dtype=np.bool_)[order], np.asarray(copies, dtype=np.float64)
    out = []
    for q in slice_shares:
        latest, seen = chain_finish(n, out_ptr, after, is_transfer, cop, float(q), indeg)
        if seen < n:
            raise InputError("xml", "the program's dependencies form a cycle: it would never finish")
        out.append(latest)
    return tuple(out)


def carried_rounds(n: int, pred: np.ndarray, succ: np.ndarray, transfer: np.ndarray, forward_wait: np.ndarray,
                   tb_of: np.ndarray, iterations: int = 3) -> int:
    """How many rounds (as :func:`step_rounds` counts them) one loop iteration starts after
    the previous in the steady state, where a thread block starts an iteration only when it has
    finished the previous one: MSCCL runs a thread block's whole step list once per loop
    iteration, in order (msccl-executor ``msccl_kernel.cu``, ``mscclRunInterpreter``: the step
    loop inside the ``gridOffset += chunkSize`` loop; RCCL's MSCCL the same). Counted on
    ``iterations`` iterations in a row, each thread block's last step waiting for its first
    step of the next (``tb_of``: the thread block of each step, in program order), as the
    rounds between the last two iterations' latest steps. It is 1 where each thread block
    takes one step an iteration (ForestColl's programs); TE-CCL's ``amd_32`` has thread blocks
    whose first and last steps are the ends of most of an iteration's chain of transfers, and
    there it is 18 of the iteration's 20 rounds: an iteration barely overlaps the next.

    >>> # thread block 0: steps 0 and 3, thread block 1: steps 1 and 2; 0 feeds 1, 2 feeds 3
    >>> pred, succ, xfer = np.array([0, 1, 0, 2]), np.array([3, 2, 1, 3]), np.array([False, False, True, True])
    >>> carried_rounds(4, pred, succ, xfer, np.zeros(4, dtype=int), np.array([0, 1, 1, 0]))
    2
    >>> carried_rounds(4, pred, succ, xfer, np.zeros(4, dtype=int), np.array([0, 1, 2, 3]))  # one step a block
    1
    """
    starts = np.flatnonzero(np.r_[True, tb_of[1:] != tb_of[:-1]])
    ends = np.r_[starts[1:] - 1, n - 1]
    if (starts == ends).all():  # one step a block: iteration k's rounds are iteration 0's plus k
        return 1
    k, wrap = np.arange(iterations)[:, None], np.arange(iterations - 1)[:, None]
    level = step_rounds(n * iterations,
                        np.concatenate([(pred + n * k).ravel(), (ends + n * wrap).ravel()]),
                        np.concatenate([(succ + n * k).ravel(), (starts + n * (wrap + 1)).ravel()]),
                        np.concatenate([np.tile(transfer, iterations), np.zeros(len(starts) * (iterations - 1), bool)]),
                        np.tile(forward_wait, iterations)).reshape(iterations, n)
    return max(int(level[-1].max() - level[-2].max()), 1)


def _longest_path(n: int, pred: np.ndarray, succ: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The steps of a heaviest path (node weights ``weight``) of the dependency DAG; an
    :class:`~collsynth.InputError` when the dependencies have a cycle (the program would hang)."""
    _, out_ptr, succ, indeg = compressed_rows(n, pred, succ)
    path, seen = heaviest_path(n, out_ptr, succ, weight.astype(np.float64), indeg)
    if seen < n:
        raise InputError("xml", "the program's dependencies form a cycle: it would never finish")
    return path


def program_features(xml: str, instance: Instance, transports: dict | None = None) -> ProgramFeatures:
    """The :class:`ProgramFeatures` of the MSCCL XML program ``xml`` on ``instance`` (ranks
    are the collective's nodes in order; see the module doc); ``transports`` (link class ->
    ``"read"`` or ``"write"``, :func:`_copies`) says which thread block of a connection
    copies across it."""
    root = algo_root(xml)
    nodes = np.array(instance.collective.nodes, dtype=np.int64)
    steps, tb_info, tbs = _steps(root, len(nodes))
    if not steps:
        raise InputError("xml", "the program has no steps")
    pred, succ, transfer = _dependencies(steps, tb_info)
    gpu = np.array([s[0] for s in steps])
    peer = np.array([tb_info[(s[0], s[1])][0] for s in steps])
    cnt = np.array([s[3] for s in steps], dtype=np.int64)
    is_send = np.array([s[2] in SEND_TYPES for s in steps])
    if ((peer[is_send] < 0) | (peer[is_send] >= len(nodes))).any() or gpu.max() >= len(nodes):
        raise InputError("xml", f"a thread block names a rank outside 0..{len(nodes) - 1}")
    send_idx = np.flatnonzero(is_send)
    first, hop_send, hop_link = endpoint_links(nodes[gpu[send_idx]], nodes[peer[send_idx]], instance)
    la = instance.topology.link_arrays
    classes = link_classes(instance)
    load = np.bincount(hop_link, weights=cnt[send_idx][hop_send], minlength=len(la)) / la.bandwidth
    class_load = {c: float(load[classes == c].max()) for c in sorted(set(classes))}
    tb_of = np.repeat(np.arange(len(tbs)), np.diff([tb_info[k][3] for k in tbs] + [len(steps)]))
    reduced = np.where([st[2] in REDUCE_TYPES for st in steps], cnt, 0)
    weight = np.ones(len(steps))
    np.add.at(weight, send_idx[hop_send], la.alpha[hop_link] * 1e6)
    path = _longest_path(len(steps), pred, succ, weight)
    on_path = np.zeros(len(steps), dtype=bool)
    on_path[path] = True
    send_class = classes[first]
    sent = _copies(len(steps), send_idx, send_class, pred[transfer], succ[transfer], cnt, transports or {})
    path_links = first[on_path[send_idx]]
    forwards = np.array([st[2] in SEND_TYPES and st[2] in RECV_TYPES for st in steps], dtype=np.int64)
    rounds = tuple(_round_features(step_rounds(len(steps), pred, succ, transfer, w * forwards) - w * forwards,
                                   pred[transfer], succ[transfer], send_idx, hop_send, hop_link, cnt, reduced, tb_of,
                                   len(tbs), instance, sent)
                   for w in (0, 1))
    carried = tuple(min(1.0, carried_rounds(len(steps), pred, succ, transfer, w * forwards, tb_of) / len(r.sent))
                    for w, r in zip((0, 1), rounds))
    cnts, col = np.unique(cnt, return_inverse=True)
    ops_rows = np.concatenate([gpu[send_idx], peer[send_idx]])
    link_ops = _count_by(hop_link, col[send_idx][hop_send], len(la), len(cnts), np.ones(len(hop_link)))
    loaded = {c: np.flatnonzero((classes == c) & (load > 0)) for c in sorted(set(classes))}
    crowd = copy_crowds(send_idx, hop_send, hop_link, tb_of, pred[transfer], succ[transfer], sent, classes,
                        la.bandwidth, send_class, transports or {})
    return ProgramFeatures(
        tb_steps=_count_by(tb_of, col, len(tbs), len(cnts), np.ones(len(steps))),
        tb_sent=np.bincount(tb_of, weights=sent, minlength=len(tbs)),
        tb_reduced=np.bincount(tb_of, weights=reduced, minlength=len(tbs)),
        tb_hops={c: _count_by(tb_of[send_idx], col[send_idx], len(tbs), len(cnts), (send_class == c).astype(np.float64))
                 for c in sorted(set(classes))},
        gpu_ops={c: _count_by(ops_rows, np.tile(col[send_idx], 2), len(nodes), len(cnts),
                              np.tile((send_class == c).astype(np.float64), 2))
                 for c in sorted(set(classes))},
        cnts=tuple(int(k) for k in cnts),
        tbs_per_gpu=int(np.bincount([g for g, _ in tbs]).max()),
        class_load=class_load, path_steps=len(path), path_sent=int(sent[path].sum()),
        path_reduced=int(reduced[path].sum()),
        path_hops={c: int((classes[path_links] == c).sum()) for c in sorted(set(classes))},
        nchunksperloop=int(root.get("nchunksperloop")), max_cnt=int(max(cnt.max(), 1)),
        proto=root.get("proto"), coll=root.get("coll"), rounds=rounds,
        path_copies=pipelined_copies(len(steps), pred, succ, transfer, sent),
        tb_links=thread_block_links(tb_of[send_idx[hop_send]], hop_link, load, classes, len(tbs)),
        carried=carried if any(d * len(r.sent) > 1 for d, r in zip(carried, rounds)) else (),
        link_load={c: load[i] for c, i in loaded.items()}, link_ops={c: link_ops[i] for c, i in loaded.items()},
        path_crowd={c: float(v[path].max(initial=0.0)) for c, v in crowd.items()}, tb_order=block_order(tbs))


def block_order(tbs: list) -> np.ndarray:
    """Per thread block ``(gpu, id)`` of ``tbs``, how many thread blocks of the same GPU have a
    lower id: the CUDA block index it runs as (MSCCL's executor launches one block per thread
    block of a GPU, block ``i`` running thread block ``i``: msccl-executor ``msccl_kernel.cu``,
    ``mscclTB = mscclAlgo->mscclTB[blockIdx.x]``).

    >>> block_order([(0, 0), (0, 2), (1, 1), (0, 1), (1, 0)]).tolist()
    [0, 2, 1, 1, 0]
    """
    ids = defaultdict(list)
    for g, t in tbs:
        ids[g].append(t)
    rank = {g: {t: k for k, t in enumerate(sorted(v))} for g, v in ids.items()}
    return np.array([rank[g][t] for g, t in tbs], dtype=np.int64)


def copy_crowds(send_idx, hop_send, hop_link, tb_of, sender, receiver, copied, classes, bandwidth, send_class,
                transports: dict) -> dict:
    """Link class -> per step, the most connections per byte/s of a link's bandwidth over the
    links of that class that the step's copy crosses (0 for a step that copies nothing,
    ``copied`` 0). A link's connections are the sending thread blocks (one per connection in
    MSCCL) of the sends that cross it (``hop_send[j]`` crosses ``hop_link[j]``); the copy is the
    send's own route on a ``"write"`` transport and the route of the send that feeds the step on
    a ``"read"`` one (the side of :func:`_copies`; ``sender[k]`` feeds ``receiver[k]``).

    Two thread blocks (steps 0 and 1) sending over link 0 (1 B/s) into steps 2 and 3, read:

    >>> copy_crowds(np.array([0, 1]), np.array([0, 1]), np.array([0, 0]), np.array([0, 1, 2, 3]),
    ...             np.array([0, 1]), np.array([2, 3]), np.array([0, 0, 1, 1]), np.array(["l"], dtype=object),
    ...             np.array([1.0]), np.array(["l", "l"], dtype=object), {"l": "read"})["l"].tolist()
    [0.0, 0.0, 2.0, 2.0]
    """
    pairs = np.unique(np.stack([hop_link, tb_of[send_idx[hop_send]]]), axis=1)
    per_link = np.bincount(pairs[0], minlength=len(bandwidth)) / bandwidth
    reads = np.array([transports.get(str(c), "write") == "read" for c in send_class], dtype=bool)
    feeds = np.full(len(send_idx), -1, dtype=np.int64)
    feeds[np.searchsorted(send_idx, sender)] = receiver
    copier = np.where(reads, feeds, send_idx)
    ok = copier >= 0
    out = {}
    for c in sorted(set(classes)):
        mine = classes[hop_link] == c
        per_send = np.zeros(len(send_idx))
        np.maximum.at(per_send, hop_send[mine], per_link[hop_link[mine]])
        per_step = np.zeros(len(tb_of))
        np.maximum.at(per_step, copier[ok], per_send[ok])
        out[c] = np.where(np.asarray(copied) > 0, per_step, 0.0)
    return out


def thread_block_links(tb: np.ndarray, link: np.ndarray, load: np.ndarray, classes: np.ndarray,
                       ntbs: int) -> dict:
    """Link class -> per thread block (``ntbs`` of them), the largest ``load[l]`` (a link's
    per-iteration chunks over its bandwidth) over the links ``l`` its sends cross: the pairs
    (``tb[j]``, ``link[j]``), a send's thread block and a link of its route (0 where it crosses
    none of the class).

    >>> load = np.array([2.0, 5.0, 1.0])
    >>> classes = np.array(["a", "a", "b"], dtype=object)
    >>> out = thread_block_links(np.array([0, 0, 1]), np.array([0, 2, 1]), load, classes, 3)
    >>> out["a"].tolist(), out["b"].tolist()
    ([2.0, 5.0, 0.0], [1.0, 0.0, 0.0])
    """
    out = {}
    for c in sorted(set(classes)):
        mine = classes[link] == c
        per = np.zeros(ntbs)
        np.maximum.at(per, tb[mine], load[link[mine]])
        out[c] = per
    return out


def _count_by(rows: np.ndarray, cols: np.ndarray, n: int, m: int, weights: np.ndarray) -> np.ndarray:
    """``out[i, j]``: the sum of ``weights`` over the entries of row ``i`` and column ``j`` (an
    ``n`` x ``m`` matrix; a vector of ``n`` when ``m`` is 1)."""
    out = np.bincount(rows * m + cols, weights=weights, minlength=n * m).reshape(n, m)
    return out[:, 0].copy() if m == 1 else out


def _round_features(level, sender, receiver, send_idx, hop_send, hop_link, cnt, reduced, tb_of, ntbs,
                    instance, copied) -> Rounds:
    """The :class:`Rounds` of a program whose steps start receiving in rounds ``level`` (a
    forwarding receive's round less its wait, :func:`step_rounds`): a
    transfer is in the round of its receive (``level`` of ``receiver``, the step fed by
    ``sender``), a reduction in its step's round."""
    recv_of = np.full(len(level), -1, dtype=np.int64)
    recv_of[sender] = receiver
    send_round = level[recv_of[send_idx]]
    n_rounds = int(max(send_round.max(initial=0), level.max(initial=0))) + 1
    la = instance.topology.link_arrays
    classes = link_classes(instance)
    load = np.bincount(send_round[hop_send] * len(la) + hop_link, weights=cnt[send_idx][hop_send],
                       minlength=n_rounds * len(la)).reshape(n_rounds, len(la)) / la.bandwidth
    copy_round = level.copy()  # a copy across a link is in the round of its transfer
    copy_round[send_idx] = send_round
    sent = np.bincount(copy_round * ntbs + tb_of, weights=copied, minlength=n_rounds * ntbs)
    red = np.bincount(level * ntbs + tb_of, weights=reduced, minlength=n_rounds * ntbs)
    # thread blocks that send and reduce alike in every round priced once (the model takes the busiest)
    kinds = np.unique(np.concatenate([sent.reshape(n_rounds, ntbs), red.reshape(n_rounds, ntbs)]), axis=1)
    return Rounds({c: load[:, classes == c].max(axis=1) for c in sorted(set(classes))},
                  kinds[:n_rounds], kinds[n_rounds:])


def _copies(n: int, send_idx: np.ndarray, send_class: np.ndarray, sender: np.ndarray, receiver: np.ndarray,
            cnt: np.ndarray, transports: dict) -> np.ndarray:
    """The chunks (``cnt``) each step copies across a connection, the copy its thread block is
    charged for at ``tb_rate``. Which side of a connection of link class ``c`` does that copy is
    the P2P transport's mode (``transports[c]``; NCCL ``src/transport/p2p.cc``, the mode chosen
    by ``ncclTopoCheckP2p`` in ``src/graph/paths.cc``): ``"read"``, NCCL's default between two
    GPUs of compute capability 8.0 joined by NVLink (A100), puts the Simple buffer on the sender
    ("the SIMPLE buffer is tagged on the end of the ncclSendMem structure"), which copies into
    it locally, and the receiving thread block reads it over the link; ``"write"``, the default
    elsewhere and for a class ``transports`` does not name, has the sender write into the
    receiver's buffer (its copy out of it is local). Local copies are not charged.

    >>> # a chain s -> rcs -> r (steps 0, 1, 2): step 0 feeds step 1, step 1 feeds step 2
    >>> idx, cls = np.array([0, 1]), np.array(["nvlink", "nvlink"], dtype=object)
    >>> _copies(3, idx, cls, idx, np.array([1, 2]), np.ones(3, dtype=int), {}).tolist()
    [1, 1, 0]
    >>> _copies(3, idx, cls, idx, np.array([1, 2]), np.ones(3, dtype=int), {"nvlink": "read"}).tolist()
    [0, 1, 1]
    """
    across = np.zeros(n, dtype=bool)
    across[send_idx] = [transports.get(str(c), "write") == "write" for c in send_class]
    reads = np.zeros(n, dtype=bool)
    reads[receiver] = [transports.get(str(c), "write") == "read" for c in send_class[np.searchsorted(send_idx, sender)]]
    return np.where(across | reads, cnt, 0)
