"""`python -m squall`: the same as the `squall` command."""
from squall.cli import main

raise SystemExit(main())
