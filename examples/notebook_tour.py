"""A notebook-style tour of collsynth's Python API: solve, compare, your own machine, price,
export, a batch and its store.

Run it as a script, ``python examples/notebook_tour.py [OUT_DIR]``, or cell by cell (the
``# %%`` markers) in an editor or notebook that understands cells. Files go to ``OUT_DIR``
(default: a new temporary folder). The formats are described in ``docs/``.
"""

# %% Set up: where files go
import sys
import tempfile
from pathlib import Path

import collsynth as cs
from collsynth.instances import CORPUS

out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="collsynth-tour-"))
out.mkdir(parents=True, exist_ok=True)

# %% An instance of the corpus, solved by one producer (produce, verify, price)
dgx1 = cs.load_instance(CORPUS / "dgx1-allgather.toml")
result = cs.solve(dgx1, "bfb-lp")
print(result)
print("lower bounds:", result.bounds)

# %% Several producers on one instance: one row each, the result columns of docs/results.md
table = cs.compare(dgx1, ["bfb-lp", "greedy", "ring", "recursive-doubling"], starts=2)
table["over_bound"] = table["time_sync_s"] / table["lower_bound_s"]
print(table[["producer", "status", "steps", "time_sync_s", "time_event_s", "over_bound"]].to_string(index=False))

# %% Your own machine: eight GPUs in two fully connected quads (50 GB/s links), GPU i joined to
# GPU i+4 (25 GB/s), written once per link as an undirected edge list (docs/topology-files.md)
quads = [(a, b) for q in (0, 4) for a in range(q, q + 4) for b in range(a + 1, q + 4)]
lines = ["# directed = false", "src,dst,bandwidth"]
lines += [f"{a},{b},50e9" for a, b in quads] + [f"{i},{i + 4},25e9" for i in range(4)]
(out / "my8gpu.csv").write_text("\n".join(lines) + "\n")
mine = cs.make_instance({"file": str(out / "my8gpu.csv"), "alpha": 1e-6}, "allreduce", name="my8gpu-allreduce",
                        message_bytes=64 << 20)
print(mine.name, mine.summary()["topology"])
print(cs.compare(mine, "ring,recursive-doubling,greedy")[["producer", "status", "steps", "time_sync_s"]]
      .to_string(index=False))

# %% One schedule under the three cost models (docs/cost-models.md), then exported for MSCCL
for model in ("sync", "ten", "event"):
    c = cs.price(result.schedule, dgx1, model)
    print(f"{model:>5}: {c.total_s:.3e} s = T_L {c.T_L_s:.3e} + T_B {c.T_B_s:.3e}")
cs.export(result.schedule, dgx1, "json", out / "dgx1-allgather.json")
cs.export(result.schedule, dgx1, "msccl-xml", out / "dgx1-allgather.xml")
print("verify the written schedule again:", cs.verify(out / "dgx1-allgather.json", CORPUS / "dgx1-allgather.toml"))

# %% A small batch into a results store, read back as a DataFrame
runs = cs.bench(instances=str(CORPUS / "ring8-allgather.toml"), producers=["ring", "recursive-doubling", "bfb-ring"],
                store=out / "store", jobs=1)
print(runs.pivot_table(index="instance", columns="producer", values="time_sync_s"))
store = cs.open_store(out / "store")
print(f"{len(store)} runs stored in {store.path}")
