"""``python -m namesrv_grpc``: same as the ``namesrv`` command."""

from namesrv_grpc.cli import main

raise SystemExit(main())
