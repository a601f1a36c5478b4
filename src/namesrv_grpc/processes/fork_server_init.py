"""Imported first by the fork server (:mod:`.fork_server`, its preload list) and by nothing else.

- Its title, as ``ps`` shows it: ``namesrv: fork server (...)``. Every child it forks sets its own.
- It ignores SIGTERM and SIGHUP. A service manager that stops ``namesrv`` by signalling every process
  of its group at once (systemd's default ``KillMode=control-group``) would otherwise kill the fork
  server first, and with it the exit statuses of the children the supervisor is stopping in order
  (each child drains its calls first). The fork server still leaves when the supervisor does
  (multiprocessing's fork server exits when its link to the supervisor closes). Each child sets
  both signals back to their defaults before anything else
  (:func:`namesrv_grpc.processes.fork_server._child_main`).
"""

import signal

import setproctitle

setproctitle.setproctitle("namesrv: fork server (imported the children's modules; forks each child)")
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
