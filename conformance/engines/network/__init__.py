"""The kit between a server backend and its server: a fault-injecting proxy (`proxy`),
operations recorded through it (`recorded`), and the failover of a replicated pair
(`failover`)."""
