"""`python -m squall`: the same as the `squall` command."""
from .tools.cli import main

raise SystemExit(main())
