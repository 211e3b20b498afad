"""The language every schedule is written in: Schedule, verification, cost models, TEN, export.

- :mod:`.schedule` -- columnar schedules with exact fractional pieces; JSON; reversal,
  concatenation, relabelling, merging.
- :mod:`.verify` -- the verifier every producer's schedule passes before it is priced.
- :mod:`.cost` -- the three cost models (synchronous alpha-beta, TEN timesteps, event
  simulation) and the lower bounds reported beside every result.
- :mod:`.ten` -- the time-expanded network formulations index their variables by.
- :mod:`.export` -- MSCCL XML (and schedule JSON) exports.
"""
