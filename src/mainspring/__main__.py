"""``python -m mainspring``."""

from mainspring.cli.commands import main

main()
