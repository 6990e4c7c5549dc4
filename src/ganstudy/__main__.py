import sys

from ganstudy.cli import main

sys.exit(main())
