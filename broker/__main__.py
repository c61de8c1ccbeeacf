import sys

from broker.server.main import main

sys.exit(main())
