"""A schedule's id columns (chunk, src, dst, step) are int32 where every id fits, int64
otherwise; what producers and the schedule algebra compute from them never wraps, and the
step view of a schedule in step order is the columns themselves."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.tens import schedule as sch
from collsynth.tens.dependencies import step_view
from collsynth.tens.verify import verify
from builders import instance_on, ring_allgather  # ring_allgather: in step order

ID_COLUMNS = ("chunk", "src", "dst", "step")


def test_every_way_of_making_a_schedule_gives_int32_ids():
    s = ring_allgather(5)
    made = {
        "from_sends": sch.from_sends(s.sends(), "allgather", 5, 5),
        "from_arrays": sch.from_arrays("allgather", 5, 5, chunk=np.asarray(s.chunk, np.int64), src=s.src.tolist(),
                                       dst=s.dst, step=s.step),
        "from_json": sch.from_json(sch.to_json(s)),
        "select": s.select(s.step > 2),
        "replace": replace(s, step=s.step.astype(np.int64) + 1),
        "reverse": sch.reverse(s),
        "concat": sch.concat(s, s),
        "relabel": sch.relabel(s, [4, 3, 2, 1, 0]),
    }
    for how, made_s in made.items():
        assert [getattr(made_s, c).dtype for c in ID_COLUMNS] == [np.dtype(np.int32)] * 4, how
        assert made_s.lo.dtype == made_s.hi.dtype == np.int32, how  # small pieces: int32 too (piece_columns)
    assert made["from_json"].sends() == s.sends()


def test_an_id_beyond_32_bits_is_kept_whole_for_the_verifier_to_name():
    inst = instance_on("ring", {"nodes": 3})
    data = sch.to_json(ring_allgather(3))
    data["sends"][1][0] = 2**32 + 1  # would wrap to chunk 1 in int32
    with pytest.raises(InputError, match=rf"sends\[1\]: chunk: .* got {2**32 + 1}$"):
        sch.from_json(data)  # outside the file's own header: malformed, named whole
    s = sch.from_sends(data["sends"], data["collective"], data["nodes"], data["chunks"])
    assert s.chunk.dtype == np.int64 and s.src.dtype == np.int32
    v = verify(s, inst)
    assert v is not None and v.index == 1 and f"chunk id {2**32 + 1} is outside 0..2" in v.reason


@given(shift=st.integers(0, 2**31 + 8), steps_apart=st.integers(1, 2**30))
@example(shift=2**31 - 2, steps_apart=2**29 + 2**27)  # sums just past int32 from int32 columns
def test_merging_and_concatenating_near_the_top_of_int32_never_wrap(shift, steps_apart):
    """Chunk offsets and step shifts are added in 64 bits: ids just under 2**31 come out whole,
    ids past it make the column int64 (the verifier then names them) instead of wrapping."""
    s = ring_allgather(4)
    merged = sch.merge([s, s], [0, shift], "concurrent")
    assert merged.chunk.tolist() == s.chunk.tolist() + (s.chunk.astype(np.int64) + shift).tolist()
    assert merged.chunk.dtype == (np.int32 if shift + 3 < 2**31 else np.int64)
    late = replace(s, step=s.step.astype(np.int64) * steps_apart)
    both = sch.concat(late, late)
    expected = late.step.tolist() + (late.step.astype(np.int64) + late.num_steps).tolist()
    assert both.step.tolist() == expected
    assert both.step.dtype == (np.int32 if max(expected) < 2**31 else np.int64)


def test_the_step_view_of_a_schedule_in_step_order_is_its_columns():
    s = ring_allgather(6)
    view = step_view(s)
    assert view.order is None
    assert all(np.shares_memory(getattr(view, c), getattr(s, c)) for c in ("chunk", "src", "dst", "lo", "hi"))
    shuffled = s.select(np.random.default_rng(1).permutation(len(s)))
    view = step_view(shuffled)
    assert view.order is not None
    assert not any(np.shares_memory(getattr(view, c), getattr(shuffled, c)) for c in ("chunk", "src", "dst"))
    assert view.chunk.tolist() == shuffled.chunk[view.order].tolist()
    assert view.steps.tolist() == list(range(1, 6))


def test_the_step_view_refuses_ids_beyond_32_bits_by_name():
    s = ring_allgather(4)
    wide = replace(s, dst=np.where(np.arange(len(s)) == 2, 2**33, s.dst.astype(np.int64)))
    assert wide.dst.dtype == np.int64
    with pytest.raises(InputError, match="dst ids must fit in 32 bits"):
        step_view(wide)
