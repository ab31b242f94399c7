import sys

from attention_conformance.cli import main

sys.exit(main())
