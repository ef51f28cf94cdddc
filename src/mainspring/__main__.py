"""``python -m mainspring``."""

from mainspring.cli import main

main()
