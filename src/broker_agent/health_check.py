"""Container health check of a broker agent, from its own Prometheus metrics.

Usage: agent-health-check [METRICS_URL] [MAX_FAILURES]
       (defaults: http://127.0.0.1:9878/metrics, 3)

Healthy (exit 0) when the agent has registered at least once and some NameServer has not failed
MAX_FAILURES registrations in a row (broker_agent_registration_consecutive_failures); exit 1
otherwise, with the reason on stderr. One unreachable NameServer does not make the agent unhealthy
(the alert BrokerAgentCannotRegister reports it). The agent serves no gRPC, so this is its health.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def _metrics_url(text: str) -> str:
    if urllib.parse.urlsplit(text).scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"must be an http:// or https:// URL, got {text!r}")
    return text


def _max_failures(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 1000000, got {text!r}")
    return value


def main(argv: list[str]) -> int:
    """``argv`` as ``sys.argv`` (the program's name first). Returns the exit code: 0 healthy, 1 not;
    a bad METRICS_URL or MAX_FAILURES exits 2 with one line naming it (SystemExit, argparse)."""
    parser = argparse.ArgumentParser(
        prog="agent-health-check", description="Container health check of a broker agent, from its own metrics."
    )
    parser.add_argument("metrics_url", metavar="METRICS_URL", nargs="?", type=_metrics_url,
                        default="http://127.0.0.1:9878/metrics")  # fmt: skip
    parser.add_argument("max_failures", metavar="MAX_FAILURES", nargs="?", type=_max_failures, default=3)
    args = parser.parse_args(argv[1:])
    url: str = args.metrics_url
    max_failures: int = args.max_failures
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
