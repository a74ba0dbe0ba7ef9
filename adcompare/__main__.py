from adcompare.cli import main

raise SystemExit(main())
