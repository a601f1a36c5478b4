"""Container health check of a broker agent, from its own Prometheus metrics.

Usage: agent-health-check [METRICS_URL] [MAX_FAILURES]
       (defaults: http://127.0.0.1:9878/metrics, 3)

Healthy (exit 0) when the agent has registered at least once and some NameServer has not failed
MAX_FAILURES registrations in a row (broker_agent_registration_consecutive_failures); exit 1
otherwise, with the reason on stderr. One unreachable NameServer does not make the agent unhealthy
(the alert BrokerAgentCannotRegister reports it). The agent serves no gRPC, so this is its health.
"""

from __future__ import annotations

import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main(argv: list[str]) -> int:
    url = argv[1] if len(argv) > 1 else "http://127.0.0.1:9878/metrics"
    max_failures = float(argv[2]) if len(argv) > 2 else 3.0
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            text = response.read().decode()
    except OSError as error:
        print(f"{url}: {error}", file=sys.stderr)
        return 1
    successes = 0.0
    failing: list[str] = []
    working = 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "broker_agent_registrations_total" and sample.labels.get("result") == "ok":
                successes += sample.value
            if sample.name == "broker_agent_registration_consecutive_failures":
                if sample.value >= max_failures:
                    failing.append(f"{sample.labels.get('namesrv')} ({sample.value:.0f} failures in a row)")
                else:
                    working += 1
    if successes == 0:
        print("not registered with any NameServer yet", file=sys.stderr)
        return 1
    if not working:
        print("cannot register with any NameServer: " + ", ".join(failing), file=sys.stderr)
        return 1
    print(f"registered ({successes:.0f} successful registrations); failing: {', '.join(failing) or 'none'}")
    return 0


def run() -> None:
    """The console script's entry point."""
    raise SystemExit(main(sys.argv))


if __name__ == "__main__":
    run()
