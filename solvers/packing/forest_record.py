"""What a tree-packing row says of each forest it emitted (``extra["forests"]``).

A forest is one half of a collective's pipelined trees (Zhao et al., "ForestColl", arXiv
2402.06787, Sections 4-5): its cut optimum ``(tau, k)``, the trees packed, their depth, the
pieces they were emitted at, what it took to find them, and every choice made on the way
(shape, door rule, root order, fill, latency choice, the capacity split's share).
"""

from __future__ import annotations


def forest_record(f, pieces: int, optimum_s: float, latency_choice=None) -> dict:
    """The row's record of forest ``f`` (:class:`.packed.Forest`) emitted at ``pieces``, its
    cut optimum ``optimum_s`` seconds for the instance's data. A forest kept with box shifts
    (``compact``) has its depth read off the first box's trees: a shift moves a tree onto one as
    deep (DGX-2 x2's split, 2,688 trees: 1 s of CPU over all, which a run returning its kept
    schedule at the limit does not have)."""
    from .tree_hops import depth_of

    first_box = f.trees[:len(f.compact.root)] if getattr(f, "compact", None) is not None else f.trees

    return {"kind": f.kind, "transposed": f.transposed, "tau": str(f.opt.tau), "k": f.opt.k, "trees_per_shard": f.k,
            "tau_packed": str(f.tau), "packed_s": f.tau and float(optimum_s * f.tau / f.opt.tau),
            "trees": len(f.trees), "depth_hops": depth_of(first_box), "pieces": pieces, "flows": f.flows,
            "witness_size": len(f.opt.witness), **{k: round(v, 4) for k, v in f.seconds.items()}, "shape": f.shape,
            **({"door_rule": f.door} if f.door else {}),
            **({"shapes_tried": f.shapes_tried, "shape_chosen_for": f.shape_objective} if f.shapes_tried else {}),
            "root_order": f.order, **({"orders_tried": f.orders_tried} if f.orders_tried else {}),
            **({"stopped": f.stopped} if f.stopped else {}),
            **({"fill_choice": f.fill, "unequal_pieces": f.cuts is not None} if f.fill else {}),
            **({"on_its_share": True} if f.on_share else {}),
            **({"links_off_the_cut_packed_at": f.held_back} if f.held_back else {}),
            **({"staggered": "pieces for the deepest trees, one more a hop shallower"} if f.staggered else {}),
            **({"latency_choice": latency_choice.as_dict()} if latency_choice else {})}
