"""The test interpreter of MSCCL programs (tests/msccl_sim.py) on hand-written programs.

Each program below is written from the executor's rules alone (no exporter involved): the
correct ones must run to the collective's postcondition, each broken variant must be refused,
so the interpreter the export tests rely on can both pass and fail.
"""

from __future__ import annotations

import pytest

from msccl_sim import Rejected, run_msccl

HEAD = ('<algo name="hand" proto="Simple" nchannels="1" nchunksperloop="{npl}" ngpus="{n}" coll="{coll}" '
        'inplace="{ip}" outofplace="{oop}" minBytes="0" maxBytes="0">')


def step(s, typ, sb="i", so=0, db="o", do=0, cnt=1, depid=-1, deps=-1, hasdep=0):
    return (f'<step s="{s}" type="{typ}" srcbuf="{sb}" srcoff="{so}" dstbuf="{db}" dstoff="{do}" cnt="{cnt}" '
            f'depid="{depid}" deps="{deps}" hasdep="{hasdep}"/>')


def tb(i, send, recv, *steps, chan=0):
    return f'<tb id="{i}" send="{send}" recv="{recv}" chan="{chan}">' + "".join(steps) + "</tb>"


def gpu(g, i, o, s, *tbs):
    return f'<gpu id="{g}" i_chunks="{i}" o_chunks="{o}" s_chunks="{s}">' + "".join(tbs) + "</gpu>"


def program(head: dict, *gpus) -> str:
    return HEAD.format(**head) + "".join(gpus) + "</algo>"


def allgather2(recv_at=(1, 0), npl=2):
    """Two GPUs, in place: each sends its own o[g] and receives the peer's into o[peer]."""
    return program({"npl": npl, "n": 2, "coll": "allgather", "ip": 1, "oop": 0},
                   *(gpu(g, 1, 2, 0, tb(0, 1 - g, -1, step(0, "s", "o", g, "o", g)),
                         tb(1, -1, 1 - g, step(0, "r", "o", 1 - g, "o", recv_at[g])))
                     for g in range(2)))


def test_two_gpu_allgather():
    assert run_msccl(allgather2(), "allgather")["modes"] == ["in-place"]
    with pytest.raises(Rejected, match="unordered"):  # gpu 1 overwrites the shard it is sending
        run_msccl(allgather2(recv_at=(1, 1)), "allgather")
    with pytest.raises(Rejected, match="output chunk"):  # 4 chunks per loop: each step moves half a shard
        run_msccl(allgather2(npl=4), "allgather")
    with pytest.raises(Rejected, match="is not reduce_scatter"):
        run_msccl(allgather2(), "reduce_scatter")
    assert run_msccl(allgather2(), "allgather", dialect="msccl-tools")["count"] == 1


def alltoall3(copy=True, relay=False):
    """Three GPUs, out of place: i[k] of g goes to o[g] of k; a GPU's own block is copied.
    With ``relay`` the block 0 -> 2 goes through gpu 1's scratch."""
    gpus = []
    for g in range(3):
        tbs, n_tb = [], 0
        for p in range(3):
            if p == g:
                continue
            sends = [] if (relay and (g, p) == (0, 2)) else [step(0, "s", "i", p, "o", g)]
            recvs = [] if (relay and (g, p) == (2, 0)) else [step(0, "r", "i", g, "o", p)]
            if relay and (g, p) == (0, 1):
                sends.append(step(1, "s", "i", 2, "s", 0))
            if relay and (g, p) == (1, 0):
                recvs.append(step(1, "r", "i", 2, "s", 0, hasdep=1))
            if relay and (g, p) == (1, 2):
                sends.append(step(1, "s", "s", 0, "o", 0, depid=-1, deps=-1))  # patched below
            if relay and (g, p) == (2, 1):
                recvs.append(step(1, "r", "s", 0, "o", 0))
            tbs.append(tb(n_tb, p, -1, *sends))
            tbs.append(tb(n_tb + 1, -1, p, *recvs))
            n_tb += 2
        if copy:
            tbs.append(tb(n_tb, -1, -1, step(0, "cpy", "i", g, "o", g)))
        gpus.append(gpu(g, 3, 3, 1 if (relay and g == 1) else 0, *tbs))
    xml = program({"npl": 3, "n": 3, "coll": "alltoall", "ip": 0, "oop": 1}, *gpus)
    if relay:  # gpu 1's forward to 2 (tb 2) waits for its receive from 0 (tb 1, step 1)
        xml = xml.replace('type="s" srcbuf="s" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1"',
                          'type="s" srcbuf="s" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="1" deps="1"')
    return xml


def test_three_gpu_alltoall():
    assert run_msccl(alltoall3(), "alltoall")["modes"] == ["out-of-place"]
    assert run_msccl(alltoall3(relay=True), "alltoall")["transmissions"] == 3 * 5 + 2
    with pytest.raises(Rejected, match="output chunk 0 holds None"):
        run_msccl(alltoall3(copy=False), "alltoall")  # gpu 0 never copies its own block
    with pytest.raises(Rejected, match="unordered"):  # the forward no longer waits for the relay's receive
        run_msccl(alltoall3(relay=True).replace('depid="1" deps="1"', 'depid="-1" deps="-1"'), "alltoall")


def reduce_chain(dep=True, hasdep=1):
    """Reduce to gpu 0 along 2 -> 1 -> 0: gpu 1 adds what arrives to i[0], then forwards."""
    g2 = gpu(2, 1, 1, 0, tb(0, 1, -1, step(0, "s", "i", 0, "i", 0)))
    g1 = gpu(1, 1, 1, 0,
             tb(0, 0, -1, step(0, "s", "i", 0, "i", 0, depid=1 if dep else -1, deps=0 if dep else -1)),
             tb(1, -1, 2, step(0, "rrc", "i", 0, "i", 0, hasdep=hasdep)))
    g0 = gpu(0, 1, 1, 0, tb(0, -1, 1, step(0, "rrc", "i", 0, "i", 0)))
    return program({"npl": 1, "n": 3, "coll": "reduce", "ip": 1, "oop": 0}, g0, g1, g2)


def test_reduce_chain_needs_its_dependency_and_flag():
    run_msccl(reduce_chain(), "reduce", root=0)
    with pytest.raises(Rejected, match="unordered"):
        run_msccl(reduce_chain(dep=False), "reduce", root=0)
    with pytest.raises(Rejected, match="deadlock"):  # the flag is never published
        run_msccl(reduce_chain(hasdep=0), "reduce", root=0)
    with pytest.raises(Rejected, match="output chunk 0"):  # gpu 1 is not the root
        run_msccl(reduce_chain(), "reduce", root=1)


def allreduce3(read_before_write=True, twice=False):
    """Allreduce of one chunk on three GPUs: each sends i[0] to both peers' scratch, then sums
    into i[0] with two fused ``re`` steps after ``nop`` steps that wait for the sends (read
    before overwrite) and the first receive; the second receive is the reduction's own dependency.
    With ``twice`` a third fused step adds the first peer's contribution again."""
    gpus = []
    for g in range(3):
        p1, p2 = [p for p in range(3) if p != g]
        waits = ([step(0, "nop", depid=0, deps=0), step(1, "nop", depid=1, deps=0)] if read_before_write else [])
        k = len(waits)
        local = waits + [step(k, "nop", depid=2, deps=0),
                         step(k + 1, "re", "s", 0, "i", 0, depid=3, deps=0),
                         step(k + 2, "re", "s", 1, "i", 0)] + ([step(k + 3, "re", "s", 0, "i", 0)] if twice else [])
        gpus.append(gpu(g, 1, 1, 2,
                        tb(0, p1, -1, step(0, "s", "i", 0, "s", 0, hasdep=1)),
                        tb(1, p2, -1, step(0, "s", "i", 0, "s", 0, hasdep=1)),
                        tb(2, -1, p1, step(0, "r", "i", 0, "s", 0, hasdep=1)),
                        tb(3, -1, p2, step(0, "r", "i", 0, "s", 1, hasdep=1)),
                        tb(4, -1, -1, *local)))
    return program({"npl": 1, "n": 3, "coll": "allreduce", "ip": 1, "oop": 0}, *gpus)


def test_nop_dependencies_and_fused_reductions():
    assert run_msccl(allreduce3(), "allreduce")["transmissions"] == 3 * 5
    with pytest.raises(Rejected, match="unordered"):
        run_msccl(allreduce3(read_before_write=False), "allreduce")
    with pytest.raises(Rejected, match=r"output chunk 0 holds \(\(0, 0\), \(1, 0\), \(1, 0\), \(2, 0\)\)"):
        run_msccl(allreduce3(twice=True), "allreduce")  # contributions are counted, not a set
    with pytest.raises(Rejected, match="carries none itself"):  # the parser's chain rule
        run_msccl(allreduce3().replace('type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="3" deps="0"',
                                       'type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1"'),
                  "allreduce")


def test_parser_rules():
    good = allgather2()
    for bad, why in [
        (good.replace('coll="allgather"', 'coll="all_gather"'), "coll"),
        (good.replace(' outofplace="0"', ""), "outofplace"),
        (good.replace('<tb id="1" send="-1" recv="1"', '<tb id="2" send="-1" recv="1"', 1), "thread block ids"),
        (good.replace('type="r"', 'type="rx"', 1), "step type"),
        (good.replace('cnt="1"', 'cnt="72"', 1), "cnt"),
        (good.replace('chan="0"', 'chan="1"', 1), "channel"),
        (good.replace('srcoff="0"', 'srcoff="2"', 1), "offset"),
        (good.replace('<tb id="0" send="1"', '<tb id="0" send="0"', 1), "peers"),
    ]:
        with pytest.raises(Rejected, match=why):
            run_msccl(bad, "allgather")
