"""Run a pytest session in a child process and read back how every test ended: one home, below every tool.

    runner.py    ``PytestJob``/``run_pytest``: a cold child (a fresh interpreter; optionally behind a
                 command such as bwrap, with only the environment given); ``PytestRun`` and
                 ``Outcome``, what a session reports; sharding (``merge_runs``), tree copies
    warm.py      ``WarmPool``: the same sessions forked from a warm server that imported torch once
                 (``submit`` takes ``PytestJob``'s arguments and returns a job whose ``result()`` is a
                 ``PytestRun``)
    outcomes.py  the one outcome recorder: a JSON line per event, each test's phases as it ends

Used by grading (``grade/grader.py`` runs its judge as a cold session; the judge registers the
recorder on its results file), ``release --check``, ``cs336 audit`` and ``cs336 snapshots``; it
imports none of them (``tests/staff/test_layers.py``).
"""
