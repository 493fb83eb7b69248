"""A run from its settings: the run specification and the wiring of a replay (replaying), and
the one way a replay becomes a run folder (pipeline)."""
