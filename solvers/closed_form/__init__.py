"""Closed-form algorithm families (seeds 002, 003, 004): one module per family."""
