from quill_stack.cli import main

raise SystemExit(main())
