"""Helpers of the running processes that know nothing of routes: the event loop (:mod:`.event_loop`),
CPU and thread policy (:mod:`.policy`), log lines and their limits (:mod:`.log_format`,
:mod:`.log_limits`), pause measurement (:mod:`.pauses`), pipes, atomic file writes and Java
properties files."""
