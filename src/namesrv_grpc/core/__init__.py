"""The domain core: the route table (RouteInfoManager), request rules (DefaultRequestProcessor),
the KV config, and the domain errors. No protocol code lives here."""
