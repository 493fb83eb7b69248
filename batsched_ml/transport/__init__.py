"""Batsim and a scheduler over ZeroMQ: Batsim 4's protocol (:mod:`.v4`), and Batsim 4 or 5 told
apart on one socket, with Batsim 5's stand-in (:mod:`.v5`). Below the run pipeline (a replay over
a socket) and the served run (``batsched-ml serve``), which both use them."""
