"""The one way to run a pytest session in a child (``cs336_staff/session``): its cold runner's options.

The warm fork-server's twins are in test_audit.py (a stuck child killed, scripts run); grading,
release --check, the audit and snapshots exercise both end to end.
"""

from __future__ import annotations

import os

import pytest

from cs336_staff.session.runner import KILLED, PytestJob, run_pytest
from cs336_staff.session.warm import WarmPool

pytestmark = pytest.mark.staff


def _tree(tmp_path, body: str):
    (tmp_path / "test_x.py").write_text(body)
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    return tmp_path


def test_a_cold_session_reports_each_outcome_and_its_exception_chain(tmp_path):
    tree = _tree(
        tmp_path,
        "import pytest\ndef test_ok(): pass\ndef test_stub():\n    raise NotImplementedError\n"
        "@pytest.mark.skip(reason='why')\ndef test_skip(): pass\n",
    )
    run = run_pytest(tree, ["-q"])
    assert {n.split("::")[1]: t.outcome for n, t in run.tests.items()} == {
        "test_ok": "passed",
        "test_stub": "failed",
        "test_skip": "skipped",
    }
    assert run.tests["test_x.py::test_stub"].not_implemented and not run.timed_out


def test_a_session_past_its_timeout_is_killed_and_says_so(tmp_path):
    tree = _tree(tmp_path, "import time\ndef test_hang():\n    time.sleep(600)\n")
    # the test sleeps 600 s: any timeout short of that shows the kill; 2 s keeps the wait short
    run = PytestJob(tree, ["-q", "-p", "no:timeout"], timeout=2).result()
    assert (
        run.timed_out
        and run.returncode == KILLED
        and "[killed: pytest ran longer than 2 s]" in run.output
    ), run.output


def test_a_prefixed_session_with_its_own_environment_and_no_outcome_plugin(tmp_path):
    """What grading uses: a command in front (bwrap there), only the environment given, the judge's own record."""
    tree = _tree(
        tmp_path,
        "import os\ndef test_env():\n    assert os.environ['MARK'] == 'from-prefix'\n"
        "    assert 'HOME_OF_PARENT' not in os.environ and 'CS336_PROBE_OUT' not in os.environ\n",
    )
    env = {"PATH": os.environ["PATH"], "HOME_OF_PARENT": "x"}
    ok = PytestJob(
        tree,
        ["-q", "-p", "no:timeout"],
        outcomes=False,
        inherit_env=False,
        env={"PATH": os.environ["PATH"]},
        prefix=["/usr/bin/env", "MARK=from-prefix"],
    ).result()
    assert ok.returncode == 0 and ok.tests == {}, ok.output
    leaky = PytestJob(
        tree,
        ["-q", "-p", "no:timeout"],
        outcomes=False,
        inherit_env=False,
        env=env,
        prefix=["/usr/bin/env", "MARK=from-prefix"],
    ).result()
    assert leaky.returncode == 1, leaky.output
    with pytest.raises(ValueError, match="outcomes=True"):
        PytestJob(tree, [], outcomes=False, hide=[tmp_path])


def test_xfail_and_xpass_and_a_fixture_error_are_told_apart(tmp_path):
    tree = _tree(
        tmp_path,
        "import pytest\n@pytest.fixture\ndef broken():\n    raise KeyError('k')\n"
        "def test_fixture(broken): pass\n@pytest.mark.xfail(reason='known')\ndef test_xf(): assert 0\n"
        "@pytest.mark.xfail(reason='fixed?')\ndef test_xp(): pass\n",
    )
    run = run_pytest(tree, ["-q", "-p", "no:timeout"])
    got = {n.split("::")[1]: (t.outcome, t.when, t.message) for n, t in run.tests.items()}
    assert got == {
        "test_fixture": ("error", "setup", "KeyError: 'k'"),
        "test_xf": ("xfailed", "call", "known"),
        "test_xp": ("xpassed", "call", "fixed?"),
    }, got


@pytest.mark.parametrize("server", ["cold", "warm"])
def test_a_child_session_behaves_the_same_on_a_ci_runner(tmp_path, monkeypatch, server):
    """Neither runner passes on CI, BUILD_NUMBER, PYTHONPATH or PYTEST_ADDOPTS: under CI pytest explains a
    failed == with a full difflib diff (a garbage run of the BPE tests took minutes) and hypothesis loads
    another profile, so the audit's runs would not be the judge's."""
    staff = str(tmp_path / "staff-only")
    others = ["CI", "BUILD_NUMBER", "PYTEST_ADDOPTS"]
    for name in others:
        monkeypatch.setenv(name, "true")
    # a runner sets its own PYTHONPATH: only the staff's must not reach it
    monkeypatch.setenv("PYTHONPATH", staff)
    tree = _tree(
        tmp_path,
        "import os\nfrom _pytest.compat import running_on_ci\n"
        "def test_env():\n    assert not running_on_ci()\n"
        f"    assert not set({others!r}) & set(os.environ), os.environ\n"
        f"    assert {staff!r} not in os.environ.get('PYTHONPATH', '')\n",
    )
    if server == "cold":
        run = run_pytest(tree, ["-q", "-p", "no:timeout"])
    else:
        with WarmPool(
            light=True
        ) as pool:  # started with CI set: its children must not see it either
            run = pool.run(tree, ["-q", "-p", "no:timeout"])
    assert run.tests["test_x.py::test_env"].outcome == "passed", run.output
