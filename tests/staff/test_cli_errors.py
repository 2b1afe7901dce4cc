"""Every command's bad input ends in one line, in argparse's form (``cs336 CMD: error: ...``), on a line
of its own, naming flags as typed and saying what to do; no traceback; and the exit status says so."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from cs336_assignment.cli import main
from cs336_staff.grade.sandbox import probe
from cs336_staff.grade.testing import make_staff_repo

pytestmark = pytest.mark.staff
INSECURE = probe(False) is not None


def _existing(path: Path) -> Path:
    path.write_bytes(b"not a folder")
    return path


def _grade(tmp: Path, *args: str) -> list[str]:
    root = make_staff_repo(tmp / "repo")
    return [
        "grade",
        *args,
        "--staff-root",
        str(root),
        "--out",
        str(tmp / "grades"),
        "--quiet",
        *(["--insecure"] if INSECURE else []),
    ]


def _pdf(tmp: Path) -> str:
    (tmp / "uploads").mkdir(exist_ok=True)
    pdf = tmp / "uploads" / "writeup.pdf"
    pdf.write_bytes(b"%PDF-1.7\n%%EOF\n")
    return str(pdf)


#: (id, argv from a temporary folder, exit status, what the error line must say)
CASES: list[tuple[str, Callable[[Path], list[str]], int, list[str]]] = [
    (
        "autograder-over-a-file",
        lambda tmp: ["autograder", str(_existing(tmp / "autograder.zip"))],
        2,
        ["is a file; give the folder to write autograder.zip into"],
    ),
    (
        "train-on-cuda-without-a-gpu",
        lambda tmp: ["train", "--device", "cuda", "--steps", "3"],
        2,
        ["argument --device", "CUDA is not available here; use cpu"],
    ),
    (
        "train-over-an-existing-checkpoint",
        lambda tmp: [
            "train",
            "--steps",
            "3",
            "--dim",
            "4",
            "--checkpoint",
            str(_existing(tmp / "run.pt")),
        ],
        2,
        ["already exists", "--resume"],
    ),
    (
        "account-with-no-gpus",
        lambda tmp: ["account", "--gpus", "0"],
        2,
        ["argument --gpus: must be a positive integer, got '0'"],
    ),
    (
        "train-with-no-steps",
        lambda tmp: ["train", "--steps", "0"],
        2,
        ["argument --steps: must be a positive integer"],
    ),
    (
        "grade-a-pdf",
        lambda tmp: _grade(tmp, _pdf(tmp)),
        1,
        ["1 of 1 submissions rejected (writeup", "not a readable zip", "make_submission.sh"],
    ),
    (
        "grade-with-no-jobs",
        lambda tmp: _grade(tmp, "--jobs", "0"),
        2,
        ["--jobs 0: must be at least 1"],
    ),
    (
        "merge-of-no-results",
        lambda tmp: ["merge", str(tmp), str(tmp), "--out", str(tmp / "m")],
        2,
        ["no */results.json", "cs336 grade"],
    ),
    (
        "grade-with-a-missing-rubric",
        lambda tmp: _grade(tmp, "--rubric", str(tmp / "nowhere.toml")),
        2,
        ["--rubric", "nowhere.toml: no such file", "rubric TOML"],
    ),
    (
        "grade-with-a-folder-for-a-rubric",
        lambda tmp: _grade(tmp, "--rubric", str(tmp)),
        2,
        ["--rubric", "no such file"],
    ),
    (
        "grade-a-folder-with-no-submission",
        lambda tmp: _grade(tmp, str(Path(_pdf(tmp)).parent)),
        2,
        ["no submissions found", "make_submission.sh"],
    ),
    (
        "merge-into-a-file",
        lambda tmp: ["merge", str(tmp), str(tmp), "--out", str(_existing(tmp / "final"))],
        2,
        ["--out", "exists and is not a folder"],
    ),
    (
        "merge-over-one-of-its-runs",
        lambda tmp: ["merge", str(tmp), str(tmp / ".."), "--out", str(tmp)],
        2,
        ["is one of the runs being merged", "choose a new folder"],
    ),
    (
        "writeup-into-a-file",
        lambda tmp: ["writeup", str(_existing(tmp / "out"))],
        2,
        ["is a file; give the folder to write assignment.pdf into"],
    ),
    (
        "writeup-key-without-a-folder",
        lambda tmp: ["writeup", "--check", "--key"],
        2,
        ["--key", "give one"],
    ),
    (
        "train-bpe-into-a-file",
        lambda tmp: [
            "train-bpe",
            str(_existing(tmp / "corpus.txt")),
            "--vocab-size",
            "300",
            "--out",
            str(_existing(tmp / "tok")),
        ],
        2,
        ["--out", "is a file; give a directory for vocab.json"],
    ),
    (
        "release-into-a-file",
        lambda tmp: ["release", str(_existing(tmp / "handout"))],
        2,
        ["exists and is not a directory", "OUT_DIR"],
    ),
]


@pytest.mark.parametrize(
    ("argv", "status", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_ends_in_one_error_line(argv, status, says, tmp_path, capsys):
    """The last thing printed is `cs336 CMD: error: ...` at the start of a line; nothing else says error."""
    args = argv(tmp_path)
    if "--device" in args and torch.cuda.is_available():
        pytest.skip("this machine has CUDA: `--device cuda` is good input here")
    got = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err
    lines = err.rstrip("\n").split("\n")
    last = lines[-1]
    prefix = f"cs336 {args[0]}: error: "
    assert last.startswith(prefix), (
        f"the last line is not `{prefix}...` on a line of its own:\n{err}"
    )
    assert all(s in last for s in says), last
    assert not [line for line in lines[:-1] if re.search(r"\berror\b", line)], err
    assert got == status, (got, err)


def test_grading_a_folder_names_what_it_skips(tmp_path, capsys):
    """A file in a folder of uploads that is neither a .zip nor a folder (the written answers' PDF) is
    named on stderr, not passed over in silence."""
    folder = Path(_pdf(tmp_path)).parent
    assert main(_grade(tmp_path, str(folder))) == 2
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if line.startswith("cs336 grade: skipping ")]
    assert (
        skipped and "writeup.pdf" in skipped[0] and "only .zip files and folders" in skipped[0]
    ), err


def test_a_slurm_submission_that_fails_ends_in_one_line(tmp_path, capsys, monkeypatch):
    """`--executor slurm` where sbatch cannot reach a controller: submitit's error, multi-line, becomes
    one line naming the executor and sbatch's own last words (was a traceback)."""
    from submitit.core.utils import FailedJobError

    from cs336_staff.grade import batch

    def refuse(*args, **kwargs):
        raise FailedJobError(
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller"
        )

    monkeypatch.setattr(batch, "run_batch", refuse)
    zip_path = tmp_path / "alice.zip"
    zip_path.write_bytes(b"PK")
    assert main(_grade(tmp_path, str(zip_path), "--executor", "slurm")) == 2
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\n")[-1]
    assert last.startswith(
        "cs336 grade: error: --executor slurm: submitting a job failed: sbatch"
    ), err
    assert "Traceback" not in err, err
