"""A DGX-2 chassis with its NVSwitch kept as a node (with and without switch copy) against the
switch unwound to degree 15: allgather by the TEN ILP, priced by all three cost models.

Run: ``python -m pytest -m benchmark benchmarks/bench_switch.py -s``. Prints, per variant,
the optimal TEN timesteps, the timestep, solve wall time and the three prices side by side,
and the kept/unwound ratio. By hand (16 GPUs, 1 MiB chunks, 125 GB/s and 0.35 us per port):
kept, every GPU's port from the switch carries 15 chunks and idles in the first timestep, so
16 timesteps of ``alpha + m / b`` (139.8 us); unwound, one timestep of ``alpha + 15 m / b``
(126.2 us): the kept switch stores and forwards, paying a second hop.
"""

from __future__ import annotations

import time

import pytest

from collsynth.formulations import ten_ilp
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers.producers import Options
from collsynth.solvers.ten import drivers
from collsynth.tens.cost import price
from collsynth.tens.verify import verify

MESSAGE = 16 * 2**20  # 1 MiB per GPU


def _run(unwind: int, params: dict) -> dict:
    inst = make_instance(build("dgx2", {"chassis": 1, "unwind": unwind}), "allgather", message_bytes=MESSAGE)
    t0 = time.perf_counter()
    out = drivers.run("horizon", inst, ten_ilp, Options(solver="highs", time_limit=600, params=params))
    wall = time.perf_counter() - t0
    s = out.schedule
    assert s is not None and verify(s, inst) is None
    return {"timesteps": s.num_steps, "status": out.status, "timestep_s": s.meta["timestep_s"], "wall_s": wall,
            **{m: price(s, inst, m).total_s for m in ("sync", "ten", "event")}}


@pytest.mark.benchmark
def test_dgx2_kept_switch_against_unwound():
    rows = {"kept, copy": _run(0, {"switch_copy": True}), "kept, no copy": _run(0, {"switch_copy": False}),
            "unwound 15": _run(15, {})}
    print(f"\nDGX-2 chassis allgather, {MESSAGE / 2**20:.0f} MiB (TEN ILP, horizon search, HiGHS):")
    for name, r in rows.items():
        print(f"  {name:14s} {r['timesteps']:3d} timesteps of {r['timestep_s'] * 1e6:7.3f} us ({r['status']}, "
              f"{r['wall_s']:5.1f} s): sync {r['sync'] * 1e6:7.1f} us, ten {r['ten'] * 1e6:7.1f} us, "
              f"event {r['event'] * 1e6:7.1f} us")
    kept, unwound = rows["kept, copy"], rows["unwound 15"]
    print(f"  kept / unwound (ten model): {kept['ten'] / unwound['ten']:.3f}")
    assert kept["timesteps"] == 16 and unwound["timesteps"] == 1
