"""Staff tooling: grading, release, snapshots, audit. Not shipped to students."""
