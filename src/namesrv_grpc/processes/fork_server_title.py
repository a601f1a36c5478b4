"""Imported first by the fork server (:mod:`.fork_server`, its preload list) and by nothing else:
gives it the title ``ps`` shows, ``namesrv: fork server``. Every child it forks sets its own."""

import setproctitle

setproctitle.setproctitle("namesrv: fork server (imported the children's modules; forks each child)")
