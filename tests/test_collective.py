"""Collectives: the chunk ids a collective uses, counted without its condition matrices."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth.instances.collective import KINDS, ROOTED, make


@st.composite
def collectives(draw):
    size = draw(st.integers(2, 7))
    nodes = draw(st.lists(st.integers(0, size - 1), min_size=2, max_size=size, unique=True))
    kind = draw(st.sampled_from(KINDS))
    root = draw(st.sampled_from(nodes)) if kind in ROOTED else None
    return make(kind, nodes, size, chunks_per_node=draw(st.integers(1, 3)), root=root)


def _table_ids(coll) -> list[int]:
    """The chunk ids of the participants, written out from the table of docs/instances.md."""
    c, S, ranks = coll.chunks_per_node, coll.size, coll.nodes
    if coll.kind in ("broadcast", "reduce"):
        return list(range(c))
    if coll.kind == "alltoall":
        return sorted((i * S + k) * c + j for i in ranks for k in ranks for j in range(c))
    return sorted(i * c + j for i in ranks for j in range(c))


@settings(max_examples=300, deadline=None)
@given(collectives())
def test_used_chunks_are_those_of_the_conditions(coll):
    """Every chunk id some node holds before or must hold after, in order, and no other: the
    ids of the chunk-id table, and the rows of the condition matrices with a node in them."""
    dense = np.flatnonzero(coll.precondition.any(axis=1) | coll.postcondition.any(axis=1))
    assert coll.used_chunks.tolist() == dense.tolist() == _table_ids(coll)
    assert coll.num_used_chunks == len(dense)


def test_describing_a_finely_chunked_collective_builds_no_condition_matrix():
    """Ten million chunks a node on 4,096 nodes: the count, without 1.7e14-cell matrices or a
    4.1e10-long list of ids."""
    coll = make("allgather", range(4096), 4096, chunks_per_node=10_000_000)
    assert coll.describe()["chunks"] == 40_960_000_000
    assert not {"_conditions", "used_chunks"} & set(vars(coll))
