from adcompare.cli.main import main

raise SystemExit(main())
