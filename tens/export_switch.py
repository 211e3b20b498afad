"""MSCCL++ plans with switch channels: an allreduce summed and multicast by NVSwitch (NVLS).

MSCCL++ (microsoft/mscclpp v0.8+, ``python/mscclpp/language/channel.py`` ``SwitchChannel``;
``src/core/executor/execution_plan.cc``: a channel of type ``switch`` with its ``buffer_type``
and ``rank_groups``, ops naming it by ``switch_channel_id`` in their buffers) reaches an
NVSwitch's multicast object: ``glres`` (group load-reduce-store, ``multimem.ld_reduce`` then
``multimem.st``) has one rank read the sum of a region of every group member's buffer through
the switch and store it into every member's buffer. That is one group operation of a reducing,
multicasting switch (:mod:`collsynth.instances.switch_ops`) in which every member sends its
piece up and the switch multicasts the sum to every member, as ``nvls`` writes it (its default
shape): each such group becomes one ``glres`` on the piece's plan chunks, issued by the chunk's
owner. Other schedules that sum in a switch are refused in one line.

The plan starts and ends with every pair of ranks signalling each other on a memory channel
(thread block 0, before a barrier of the GPU's thread blocks and after a second one), as
MSCCL++'s own NVLS allreduce does: no rank reads a peer's buffer before the peer has started,
and none returns before every store into it is done. ``glres`` ops are spread over the other
thread blocks, at most 64 ops each; each touches plan chunks no other op touches. At most 16
ranks (thread block 0's channels).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .. import InputError
from ..instances.instance import Instance
from ..instances.switch_ops import copying_mask, reducing_mask
from .dependencies import switch_back
from .schedule import OP_COPY, Schedule

MAX_OPS = 64  # the executor's ops per thread block
GLRES_PER_BLOCK = 60  # with the two barriers, within MAX_OPS


def group_ranks(instance: Instance) -> dict[int, list[int]]:
    """``{switch: ranks}``: the reducing, multicasting switches and the ranks (positions in the
    collective's nodes) linked both ways to each."""
    topo, nodes = instance.topology, instance.collective.nodes
    out = {}
    for w in np.flatnonzero(reducing_mask(topo) & copying_mask(topo, False)).tolist():
        out[w] = [r for r, v in enumerate(nodes) if topo.has_link(v, w) and topo.has_link(w, v)]
    return out


def glres_groups(schedule: Schedule, instance: Instance) -> list[tuple[int, int, int, int, int]]:
    """``(step, switch, chunk, lo, hi)`` of every group operation of ``schedule``, which must each
    take every member's piece up (step ``t``) and multicast the sum to every member as a copy
    (the step after); an :class:`~collsynth.InputError` naming the first send that does not."""
    s, nodes = schedule, instance.collective.nodes
    groups = group_ranks(instance)
    rank = {v: r for r, v in enumerate(nodes)}
    back = switch_back(s, instance)
    ups, downs = defaultdict(list), defaultdict(list)
    for i in range(len(s)):
        u, v = int(s.src[i]), int(s.dst[i])
        key_piece = (int(s.chunk[i]), int(s.lo[i]), int(s.hi[i]))
        if v in groups and u in rank:
            ups[(int(s.step[i]), v, *key_piece)].append(rank[u])
        elif u in groups and v in rank and int(s.op[i]) == OP_COPY:
            downs[(int(s.step[i]) - int(back[i]), u, *key_piece)].append(rank[v])
        else:
            raise InputError("schedule", f"send {i} ({u}->{v}) is not part of a switch's group load-reduce-store "
                             "(every member's piece up, the sum copied down to every member): not written as "
                             "switch channels")
    for key in sorted(set(ups) | set(downs)):
        members = sorted(groups[key[1]])
        if sorted(ups.get(key, [])) != members or sorted(downs.get(key, [])) != members:
            raise InputError("schedule", f"the group operation of switch {key[1]} on chunk {key[2]} in step {key[0]} "
                             "does not take every member's piece up and multicast the sum to every member: not "
                             "written as switch channels")
    return sorted(ups)


def switch_plan(schedule: Schedule, instance: Instance, *, name: str, min_message_size: int,
                max_message_size: int) -> dict:
    """The MSCCL++ plan (module doc) of an allreduce whose every send is part of a group
    load-reduce-store of one reducing, multicasting switch whose group is every rank."""
    coll = instance.collective
    n, c, D = len(coll.nodes), coll.chunks_per_node, schedule.denom
    members = group_ranks(instance)
    ops = glres_groups(schedule, instance)
    if len(members) != 1 or len(next(iter(members.values()))) != n or n > 16:
        raise InputError("schedule", "switch channels are written for one switch whose group is every rank "
                         "(at most 16)")
    rank = {v: r for r, v in enumerate(coll.nodes)}
    per_rank: dict[int, list[dict]] = defaultdict(list)
    for step, w, chunk, lo, hi in ops:
        owner = rank[chunk // c]
        cell = (owner * c + chunk % c) * D + lo
        buff = {"switch_channel_id": 0, "index": cell, "size": hi - lo}
        per_rank[owner].append({"name": "glres", "src_buff": [buff], "dst_buff": [dict(buff)], "channel_type": "switch",
                                "reduce_op": "sum"})
    gpus = [_gpu(g, n, n * c * D, per_rank[g]) for g in range(n)]
    return {"name": name, "collective": "allreduce", "protocol": "Simple", "inplace": True, "reuse_resources": False,
            "gpus": gpus, "num_threads_per_block": 1024, "use_double_scratch_buffer": False, "buffer_alignment": 16,
            "min_message_size": int(min_message_size), "max_message_size": int(max_message_size)}


def _gpu(g: int, n: int, chunks: int, glres: list[dict]) -> dict:
    """GPU ``g``'s part: thread block 0 signals every peer and waits for each before a barrier
    of all its thread blocks and again after a second one; the others run at most
    :data:`GLRES_PER_BLOCK` ``glres`` ops between the two barriers."""
    parts = [glres[k:k + GLRES_PER_BLOCK] for k in range(0, len(glres), GLRES_PER_BLOCK)]
    T = len(parts) + 1
    sync = [{"name": "signal", "channel_ids": [q], "channel_type": "memory"} for q in range(n - 1)] + \
        [{"name": "wait", "channel_ids": [q], "channel_type": "memory"} for q in range(n - 1)]
    barrier = [{"name": "barrier", "barrier_id": b, "num_threadblocks": T} for b in (0, 1)]
    blocks = [{"id": 0, "ops": sync + barrier + sync, "remote_buffer_refs": [],
               "channels": [{"channel_type": "memory", "channel_ids": list(range(n - 1))}]}]
    for t, part in enumerate(parts, start=1):
        blocks.append({"id": t, "ops": barrier[:1] + part + barrier[1:], "remote_buffer_refs": [],
                       "channels": [{"channel_type": "switch", "channel_ids": [0]}]})
    peers = [p for p in range(n) if p != g]
    return {"id": g, "input_chunks": chunks, "output_chunks": chunks, "scratch_chunks": 0, "threadblocks": blocks,
            "channels": [{"channel_type": "memory", "connected_to": peers},
                         {"channel_type": "switch", "buffer_type": "i",
                          "rank_groups": [{"size": n, "ranks": list(range(n))}]}],
            "remote_buffers": []}
