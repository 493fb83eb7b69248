"""Serving a real Batsim: the served run (over the ZeroMQ transports of
:mod:`batsched_ml.transport`, or inside Batsim 5 as its library), what it leaves behind and
``collect``, which turns it into a replay's results."""
