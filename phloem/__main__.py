"""`python -m phloem` runs the `phloem` command."""

import sys

from phloem.cli.main import main

sys.exit(main())
