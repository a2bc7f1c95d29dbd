"""``python -m repeat_failure`` runs the ``repeat-failure`` command line."""

import sys

from repeat_failure.cli import main

sys.exit(main())
