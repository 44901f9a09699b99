"""`python -m acklab.orchestration.cli`: the `acklab` command."""

from acklab.orchestration.cli import main

main()
