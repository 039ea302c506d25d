import sys

from dkernel.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
