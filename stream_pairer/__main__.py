import sys

from stream_pairer.cli.app import main

sys.exit(main())
