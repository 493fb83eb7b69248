"""The errors a user can fix: the command line prints them as one ``batsched-ml: error:`` line
(exit 2); anything else escaping a command is a bug in batsched-ml and keeps its traceback.

Each module's own error classes (``SwfError``, ``WorkloadError``, ``ProtocolError``, ...)
derive from :class:`UserError` as well as from the built-in class they always were, so that
code catching ``ValueError`` keeps working. A plain ``ValueError`` or ``KeyError`` raised
deep inside is *not* a user error: it would otherwise be reported as bad input and hidden.
"""

from __future__ import annotations


class UserError(Exception):
    """Something in what the user gave (a file, an option, a folder, a peer) is wrong; the
    message names it."""


class TransportError(RuntimeError):
    """The peer went silent, or the connection failed (:mod:`batsched_ml.transport`; here so
    that the command line catches it without importing ZeroMQ for every command): exit 1."""


class ConfigError(UserError, ValueError):
    """A setting that cannot be used: unknown name, wrong type, value out of range, or two
    settings that do not go together."""


class PeerGone(TransportError):
    """The peer closed its connection while an answer from it was awaited (its process ended):
    no answer can come. Exit 3, told apart from a peer that is only silent (exit 1)."""
