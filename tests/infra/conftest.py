"""tests/infra import the deploy scripts' modules (scripts/fanfuse_deploy): the very code the
build and the rehearsal run."""

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
