"""`python -m phloem` runs the `phloem` command."""

import sys

from phloem.cli import main

sys.exit(main())
