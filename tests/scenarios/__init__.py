"""Scenarios: the loops that drive your objects over many calls; they run in the test (see tests/boundary.py)."""
