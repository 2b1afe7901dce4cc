"""Tests of the staff tooling (not graded, not shipped in the handout)."""
