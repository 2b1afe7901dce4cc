"""Scenarios: code that drives your objects on your side of the line (see tests/boundary.py)."""
