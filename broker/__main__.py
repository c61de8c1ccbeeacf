import sys

# kio registers Hypothesis strategies for its types whenever Hypothesis is importable (it
# is, as a test dependency). A broker never uses them, and importing Hypothesis cost
# ~0.3 s of CPU in every broker start; kio treats an ImportError as "not installed".
sys.modules.setdefault("hypothesis", None)

from broker.server.main import main  # noqa: E402

sys.exit(main())
