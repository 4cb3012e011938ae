"""`python -m sessiongate.cli`."""

from sessiongate.cli import main

main()
