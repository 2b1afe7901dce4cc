"""Drivers: short functions that build your objects through adapters, run them, and return plain data for the tests to check (see tests/boundary.py)."""
