"""``python -m widehouse`` runs the CLI."""

from __future__ import annotations

import sys

from widehouse.cli import main

sys.exit(main())
