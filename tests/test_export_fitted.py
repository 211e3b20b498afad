"""Tree layouts fitted within a GPU's SMs (tens/export_layout.py ``fitted_channels``, layout
``fitted``): merges counted by hand, random schedules exported within a random thread-block
count, run on the executor's interpreter, read back and verified, refused exactly when even one
thread block per peer and direction exceeds it; and the export choice picking the fitted layout
when a (stand-in) price says it is cheapest."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from collsynth import InputError
from collsynth.tens.export_choice import chosen_export, program_shape
from collsynth.tens.export_layout import fitted_channels

from builders import topologies
from test_export_fuse import fused_roundtrip, random_tree_schedule
from test_export_layout import three_trees


def thread_blocks(xml: str) -> list[int]:
    return [len(gpu.findall("tb")) for gpu in ET.fromstring(xml).iter("gpu")]


def test_three_trees_fit_in_three_then_two_thread_blocks():
    """``three_trees``: tree t on channel t; pair 1->2 carries trees 0 and 2, 2->0 trees 0 and 1,
    0->1 trees 1 and 2, so every GPU runs two send and two receive thread blocks (4). Within 3:
    GPU 0 first (the most, lowest id), its pairs 0->1 (channels 1, 2) and 2->0 (0, 1) each
    merge two one-send channels, 0->1 first (lower pair): onto channel 1; GPU 2 then has the
    most (4), 1->2 merges onto channel 0: counts 3, 2, 3. Within 2, 2->0 too: one channel a pair."""
    s, inst = three_trees()
    src, dst = s.src.tolist(), s.dst.tolist()
    chan = [0, 1, 2, 0, 1, 2]  # sends in schedule order: trees 0, 1, 2's first hop, then their second
    assert (src, dst) == ([1, 2, 0, 2, 0, 1], [2, 0, 1, 0, 1, 2])
    assert fitted_channels(chan, src, dst, [()] * 6, 4).tolist() == chan
    assert fitted_channels(chan, src, dst, [()] * 6, 3).tolist() == [0, 1, 1, 0, 1, 0]
    assert fitted_channels(chan, src, dst, [()] * 6, 2).tolist() == [0, 0, 1, 0, 1, 0]
    with pytest.raises(InputError, match="GPU 0 needs 2 thread blocks"):
        fitted_channels(chan, src, dst, [()] * 6, 1)


@pytest.mark.parametrize("most", [3, 2])
def test_a_fitted_tree_layout_runs_reads_back_and_verifies_within_the_count(most):
    """The tree layout of ``three_trees`` runs 4 thread blocks unfused on every GPU; fitted
    within ``most`` it runs at most that many, on the interpreter, read back and verified."""
    s, inst = three_trees()
    assert thread_blocks(fused_roundtrip(s, inst, fuse=False, layout="trees")) == [4, 4, 4]
    for fuse in (False, True):
        xml = fused_roundtrip(s, inst, fuse=fuse, layout="fitted", max_thread_blocks=most)
        assert max(thread_blocks(xml)) <= most


@settings(max_examples=25, deadline=None)
@given(topologies(max_nodes=6), st.randoms(use_true_random=False),
       st.sampled_from(["reduce_scatter", "allreduce", "allgather"]), st.integers(1, 12), st.booleans())
def test_random_schedules_fit_any_count_one_thread_block_per_peer_allows(topo, rnd, kind, most, fuse):
    """Random tree schedules exported fitted within ``most`` thread blocks a GPU: refused exactly
    when a GPU has more (send or receive) peers than ``most`` (one thread block per peer and
    direction is the fewest the executor runs), else within ``most``, run on the executor's
    interpreter, read back and verified."""
    schedule, inst = random_tree_schedule(topo, rnd, kind)
    peers = Counter()
    for u, v in {(int(a), int(b)) for a, b in zip(schedule.src.tolist(), schedule.dst.tolist())}:
        peers[u] += 1
        peers[v] += 1
    if max(peers.values(), default=0) > most:
        with pytest.raises(InputError, match="thread blocks"):
            fused_roundtrip(schedule, inst, fuse=fuse, layout="fitted", max_thread_blocks=most)
        return
    xml = fused_roundtrip(schedule, inst, fuse=fuse, layout="fitted", max_thread_blocks=most)
    assert max(thread_blocks(xml)) <= most


def test_the_choice_takes_the_fitted_layout_when_it_prices_lowest():
    """A stand-in price that, like the ``runtime`` model's shared SMs, punishes a GPU running
    more thread blocks than its 3 SMs and otherwise rewards thread blocks running side by side
    (price -thread blocks, or 100 past 3). ``three_trees``: trees 4 (100), packed 2 (-2),
    fitted within 3 gives 3 (-3): the choice is the fitted program; without the SM count the
    fitted layout is not tried and the packed one (-2) is chosen."""
    s, inst = three_trees()

    def price(text):
        tbs = program_shape(text)["thread_blocks"]
        return 100.0 if tbs > 3 else -float(tbs)

    found = chosen_export(s, inst, price, layouts=("links", "trees", "fitted"), fuses=(False,), max_thread_blocks=3)
    assert (found.layout, found.seconds, program_shape(found.text)["thread_blocks"]) == ("fitted", -3.0, 3)
    found = chosen_export(s, inst, price, layouts=("links", "trees"), fuses=(False,))
    assert (found.layout, found.seconds) == ("links", -2.0)
