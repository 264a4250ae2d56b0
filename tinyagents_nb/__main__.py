"""``python -m tinyagents_nb``: the README's main job (a short, offline harness demo)."""

from __future__ import annotations

import sys

from ._demo import main

sys.exit(main(sys.argv[1:]))
