"""Measuring, the role nvbench plays: arrays and the stream (backend), the sampler (timing), the
accounting of timed launches (ledger), pass or fail (checking), and what made a number (provenance). Every timing in
the project goes through it; it names no family and no workload."""
