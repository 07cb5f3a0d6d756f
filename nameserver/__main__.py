"""``python -m nameserver ...`` runs one name server, exactly as ``nsaudit nameserver ...``."""

from __future__ import annotations

import sys

from nameserver.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
