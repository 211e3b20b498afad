"""Paper reports computed from our own schedules (they run the algorithms, then hand
DataFrames to :mod:`collsynth.results` for rendering)."""
