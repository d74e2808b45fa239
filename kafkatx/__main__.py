"""``python -m kafkatx``."""

import sys

from kafkatx.cli.main import main

sys.exit(main())
