"""Run a pytest session in a child process and read back how every test ended: one home, below every tool.

    runner.py    ``PytestJob``/``run_pytest``: a cold child (a fresh interpreter); ``PytestRun`` and
                 ``Outcome``, what a session reports; sharding (``merge_runs``), tree copies
    warm.py      ``WarmPool``: the same sessions forked from a warm server that imported torch once
                 (``submit`` takes ``PytestJob``'s arguments and returns a job whose ``result()`` is a
                 ``PytestRun``)
    outcomes.py  the pytest plugin both load in the child: how each test ended, as JSON

Used by ``release --check``, ``cs336 audit`` and ``cs336 snapshots``; it imports none of them.
"""
