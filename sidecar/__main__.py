"""``python -m sidecar`` runs the ``repeat-failure`` command line."""

import sys

from sidecar.cli import main

sys.exit(main())
