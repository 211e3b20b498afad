"""BFB schedules on direct-connect topologies: the per-(node, step) LP driver, the expansions
that build larger topologies with their schedules, and the topology finder."""
