"""BFB schedules on direct-connect topologies: the per-(node, step) LP solves and the BFB
producers (``per_step``), the expansions that build larger topologies with their schedules,
and the topology finder."""
