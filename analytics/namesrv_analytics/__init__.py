"""PySpark batch jobs over the NameServer's route snapshots (``namesrv_grpc.snapshot_schema``).

Jobs (each ``python -m analytics.<job>`` and ``spark-submit analytics/namesrv_analytics/<job>.py``):

- :mod:`namesrv_analytics.topic_distribution` -- how topics spread over brokers, per snapshot and as a trend
- :mod:`namesrv_analytics.namesrv_consistency` -- where the route tables of several NameServers differ, how long
- :mod:`namesrv_analytics.churn` -- brokers appearing and disappearing (flaps), topics created and deleted

Shared: :mod:`namesrv_analytics.common` (session, reading snapshots, writing outputs), :mod:`namesrv_analytics.report`
(the HTML report with charts), :mod:`namesrv_analytics.synthetic` (synthetic snapshots at any scale).
Every transformation is DataFrame API only (no Python UDFs), so executors need no project code.
"""
