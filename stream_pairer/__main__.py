import sys

from stream_pairer.cli import main

sys.exit(main())
