"""``python -m dsh_cli`` is ``dsh``."""

import sys

from ._main import main

sys.exit(main())
