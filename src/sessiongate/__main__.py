"""`python -m sessiongate`: the `sessiongate` command."""

from sessiongate.cli import main

main()
