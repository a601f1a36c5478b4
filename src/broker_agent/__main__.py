"""``python -m broker_agent``: same as the ``broker-agent`` command."""

from broker_agent.cli import main

raise SystemExit(main())
