"""What is solved: topologies, their generators, collectives and instances (and the corpus).

>>> from collsynth.instances import generators, make_instance
>>> inst = make_instance(generators.build("ring", {"nodes": 4}), "allgather")
>>> inst.collective.num_chunks
4
"""

from .collective import COMBINING, KINDS, ROOTED, Collective, make
from .instance import Instance, instance_from_dict, load_instance, make_instance
from .topology import LinkArrays, Topology, from_edges, moore_bound
from . import clos, generators, hgx_h100, systems  # systems, hgx_h100 and clos register the real-cluster generators

CORPUS = __import__("pathlib").Path(__file__).parent / "corpus"

__all__ = [
    "COMBINING", "KINDS", "ROOTED", "Collective", "make", "Instance", "instance_from_dict",
    "load_instance", "make_instance", "LinkArrays", "Topology", "from_edges", "moore_bound",
    "clos", "generators", "hgx_h100", "systems", "CORPUS",
]
