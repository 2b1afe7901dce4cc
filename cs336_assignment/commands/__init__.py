"""Student-facing subcommands of ``cs336`` (see ``cs336_assignment/cli.py``)."""
