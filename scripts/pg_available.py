"""Exit 0 when a PostgreSQL server answers at the URL given as the only argument.

Run as ``python scripts/pg_available.py postgresql://user@host:port`` (no database part).
"""

import sys
from pathlib import Path

# Run as a script, so the repository root (home of tests.support) is not on sys.path yet.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.postgres import available


def main() -> int:
    return 0 if available(sys.argv[1]) else 1


if __name__ == "__main__":
    sys.exit(main())
