"""`python -m pytest_agenteval report ...`"""

import sys

from .cli import main

sys.exit(main())
