"""Serving a real Batsim: the ZeroMQ transports of Batsim 4 and 5, Batsim 5's library mode,
what a served run leaves behind and ``collect``, which turns it into a replay's results."""
