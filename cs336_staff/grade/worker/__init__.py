"""What runs inside the sandbox: the worker's request loop (main.py), the codec and the channel.

This package is copied into each sandbox as ``cs336_worker`` and must import nothing from
``cs336_staff`` (which the sandbox does not contain): only the standard library, numpy, torch,
safetensors, and its own modules through relative imports.
"""
