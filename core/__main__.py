"""`python -m squall`: the same as the `squall` command."""
from .cli import main

raise SystemExit(main())
