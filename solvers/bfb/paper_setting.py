"""The network the topology finder prices allreduce on by default: the setting of Zhao et al.,
"Efficient Direct-Connect Topologies for Collective Communications", NSDI 2025, Table 4
(10 us node latency, 100 Gbps node bandwidth, 1 MB). Apart from :mod:`.finder` so that
``collsynth finder --help`` shows them without loading the finder (Pyomo, SciPy, numba).
"""

PAPER_ALPHA = 10e-6  # s, the node latency used for the allreduce columns
PAPER_BANDWIDTH = 100e9 / 8  # bytes/s: 100 Gbps node bandwidth
PAPER_MESSAGE = 1e6  # bytes
