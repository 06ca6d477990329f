"""What every transport of the client shares: the outcome of one attempt
at one broker, and the request as the transports see it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple


class NotSent(Exception):
    """The body never reached the broker (connection refused, handshake or
    upgrade failed, the write failed): it did not run; safe to send elsewhere."""


class Lost(Exception):
    """The body was sent and the connection died before its (whole) answer."""


class NoAnswer(Exception):
    """The body was sent and no answer came by the deadline."""


@dataclass
class Request:
    body: bytes                                  # the JSON bytes, never re-serialised
    timeout_ms: int                              # sent to the broker
    wait_s: float                                # how long to wait for the answer
    headers: Dict[str, str] = field(default_factory=dict)   # HTTP form (signing, traceparent, ...)
    zmq_header: Dict[str, object] = field(default_factory=dict)  # ZeroMQ header frame
    ids: List[object] = field(default_factory=list)         # ids expecting an answer (WebSocket)
    asked_ms: int = 0                            # the deadline asked for (WebSocket: per connection)


# One streamed answer: (position or None, the response object's JSON bytes).
StreamItem = Tuple[Optional[int], bytes]
# What a streaming send yields: items, then the end (summary or whole-body error) as
# ("end", bytes) -- see Stream in client.py.
StreamEvents = Iterator[Tuple[str, Optional[int], bytes]]
