"""Greedy synthesis on the time-expanded network (TACOS-Greedy)."""
