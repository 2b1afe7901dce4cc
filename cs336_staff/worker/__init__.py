"""What runs inside the sandbox: the worker's request loop (main.py), the codec, the channel, and
the adapter rule (adapter_rule.py: what counts as an adapter and what it calls, asked by the staff tools too).

This package is copied into each sandbox as ``cs336_worker`` and must import nothing from
``cs336_staff`` (which the sandbox does not contain): only the standard library, numpy, torch,
and its own modules through relative imports.
"""
