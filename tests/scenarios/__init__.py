"""Drivers: short functions that build your objects through adapters, run them, and return plain data for the tests to check (see tests/boundary.py).

``OneTorchThread`` is what drivers of more than one part use: a run whose result (checkpointing's
bit-identical resumption) or whose time (data's speed tests) must not depend on torch's threads.
"""

from __future__ import annotations

import torch


class OneTorchThread:
    """While entered, torch runs on one thread in this process; the thread count is put back on exit."""

    def __enter__(self) -> None:
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc_info: object) -> None:
        torch.set_num_threads(self.threads)
