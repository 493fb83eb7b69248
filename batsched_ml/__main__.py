from batsched_ml.cli import main

raise SystemExit(main())
