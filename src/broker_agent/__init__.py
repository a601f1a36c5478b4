"""broker-agent: a sidecar that registers an Apache RocketMQ broker with every NameServer, reading the
broker's own ``broker.conf`` and ``store/config/topics.json`` (rules S30-S38).

``config.py`` (broker.conf) and ``topics.py`` (topics.json) read the files; ``agent.py`` runs the
rounds; ``client.py`` talks gRPC; ``cli.py`` is the ``broker-agent`` command.
"""
