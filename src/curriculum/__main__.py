import sys

from curriculum.cli import main

sys.exit(main())
