"""Exit 0 when a PostgreSQL server answers at the URL given as the only argument."""

import sys

import psycopg


def main() -> int:
    try:
        with psycopg.connect(sys.argv[1] + "/postgres", connect_timeout=3):
            return 0
    except psycopg.Error:
        return 1


if __name__ == "__main__":
    sys.exit(main())
