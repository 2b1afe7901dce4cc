"""Grading: run the staff's tests against untrusted submissions, safely and at scale.

    uv run cs336 grade [SUBMISSION ...] [--out DIR] [--jobs N] [--executor local|slurm] [--device cpu|gpu|auto]
    uv run cs336 merge CPU_DIR GPU_DIR [--out DIR]

One module per concern, in the order a submission flows through them (the rubric, test-id patterns ->
points, concept, visibility, is ``cs336_staff/rubric.py``: the parts read it too):

    intake.py    take only the graded files out of a zip or folder (traversal, symlinks, bombs)
    grader.py    one submission: stage it, run the judge, score every expected test
    spec.py      the judge spec: one typed, versioned record the grader writes and the judge reads
    judge.py     the pytest plugin of the trusted judge process (it never imports the submission)
    remote.py    the judge's client of the worker: calls out, plain data and proxies back
    sandbox.py   the worker's bubblewrap sandbox: what it sees, how it starts
    limits.py    the limits on the worker's whole process tree: cgroup v2 or a watchdog, rlimits
    worker/      what runs inside the sandbox: the request loop, the codec, the framed channel
    report.py    Gradescope results.json, JUnit XML, concept table, CSV gradebook
    batch.py     many submissions: process pool or submitit (Slurm), resume, skip finished
    merge.py     ``cs336 merge``: one result from a CPU run and a GPU run
    example.py   the bundled example submission (the reference, packaged)
    testing.py   a tiny synthetic staff repo and hostile-submission builders for the tests
    cli.py       ``cs336 grade``

What is and is not defended: THREAT_MODEL.md beside this file.
"""
