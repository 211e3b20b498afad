"""The language every schedule is written in: Schedule, verification, cost models, TEN, export.

- :mod:`.schedule` -- columnar schedules with exact fractional pieces; JSON; reversal,
  concatenation, relabelling, merging.
- :mod:`.verify` -- the verifier every producer's schedule passes before it is priced.
- :mod:`.cost` -- the three cost models (synchronous alpha-beta, TEN timesteps, event
  simulation); :mod:`.cost_models` -- their registry, one module per model, which every run
  prices under; their compiled loops: :mod:`.sync_kernel`, :mod:`.ten_kernel` (occupancy in
  :mod:`.page_table`), :mod:`.event_kernel` (:mod:`.event_queue`, :mod:`.event_layout`).
- :mod:`.bounds` -- every lower bound reported beside a result, per cost model, each with
  the argument (distance, per-node, cut, LP) and the node set that proved it.
- :mod:`.ten` -- the time-expanded network formulations index their variables by.
- :mod:`.export` -- MSCCL XML (and schedule JSON) exports.
- :mod:`.choices` -- the names a user picks among (cost models, formats, dialects), known
  without loading the rest (a command's ``--help`` lists them).
"""
