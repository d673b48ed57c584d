from bot.ops.cli import main

raise SystemExit(main())
