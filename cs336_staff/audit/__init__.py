"""The audit: staff checks that the tests grade what they claim to grade. Not shipped to students.

One module per check, and the pytest plugins the checks load into the test runs they start:

    cli.py            ``cs336 audit``: its options, and the order the checks run in (zoo, then garbage)
    mutants.py        the bug zoo: every mutant of ``cs336_staff/mutants/`` (a realistic student bug)
                      fails a public test
    hidden_only.py    the bugs only hidden tests catch (a part module's ``HIDDEN_ONLY``) pass the public
                      tests and cost at least one point of 100 in hidden ones, under ``rubric.toml``
    part_reach.py     no part's tests execute another part's solution functions (the training loop's
                      excepted), measured on the zoo's baseline run; writes ``cs336_staff/used_by.json``
    reach_probe.py    plugin: records which solution functions each test executes (for part_reach.py,
                      garbage_check.py and agreement_plan.py)
    garbage_check.py  zero or noise garbage of a graded function fails every test its stub fails
    garbage.py        plugin: the garbage itself, put in place of one graded function or class
    contracts.py      what the tests demand is in the docstrings (a Raises: entry for each error a test
                      matches, in its words), and every solution function is graded or says it is optional
                      (``tests/staff/test_contracts.py`` runs it)
    raises_probe.py   plugin: records every exception a test catches with ``pytest.raises`` (for contracts.py)
    agreement.py      every public test has the same outcome in one process and split into
                      worker and judge, on the reference, the zoo, garbage and a corpus of independent
                      implementations (``cs336 audit --agreement``)
    agreement_plan.py which tests each of those implementations runs (those that enter what it
                      changes), and which share one run

The plugins run in a scratch copy of the public tree, which imports nothing of this repository
(``reach_probe.py`` and ``garbage.py`` are copied into it), or as ``-p cs336_staff.audit.raises_probe``.
What a function reaches statically (through the code students are given) is ``tests/rules.py``'s
analysis, the one the rules screen uses; ``contracts.py`` asks it.
"""
