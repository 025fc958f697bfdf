"""Pod log bytes -> lines of bounded length, and the marker of what was cut (pure).

Why not the HTTP client's line reader: it holds a whole line in memory and fails on one longer than its
limit, which ended the stream: a 10 MB line without a newline made every later line of that pod vanish.
Here a stream is read in chunks of any size and a line keeps at most ``keep`` bytes; the rest is counted,
never held, and the relay says how much it cut.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["LineBudget", "LineSplitter", "cut_line"]


class LineSplitter:
    """Whole lines out of chunks: each line's first ``keep`` bytes and how many bytes after them were cut."""

    def __init__(self, keep: int) -> None:
        self.keep = max(1, keep)
        self._head = bytearray()
        self._cut = 0

    def feed(self, chunk: bytes) -> Iterator[tuple[bytes, int]]:
        """The lines ``chunk`` completes (without their newline), each as (kept bytes, bytes cut), one at a
        time: a chunk can hold tens of thousands of lines, and the relay gives the event loop a turn between
        them (splitting the whole chunk first held the loop for up to 0.2 s of CPU in a flood). Read each
        generator to its end before feeding the next chunk: the chunk's unfinished last line is kept then."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._take(chunk[start:])
                return
            if not self._head and not self._cut:  # a whole line inside this chunk: no copy into the head
                size = end - start
                yield chunk[start : start + min(size, self.keep)], max(0, size - self.keep)
            else:
                self._take(chunk[start:end])
                yield self._pop()
            start = end + 1

    def end(self) -> tuple[bytes, int] | None:
        """The last line when the stream ended without a newline; None when it ended on one."""
        return self._pop() if self._head or self._cut else None

    def _take(self, piece: bytes) -> None:
        room = self.keep - len(self._head)
        if room > 0:
            self._head += piece[:room]
        self._cut += max(0, len(piece) - max(room, 0))

    def _pop(self) -> tuple[bytes, int]:
        line, cut = bytes(self._head), self._cut
        self._head.clear()
        self._cut = 0
        return line, cut


def cut_line(text: str, bytes_cut: int, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, with a marker saying how many bytes of the line were cut
    (those the splitter never kept plus those cut here); ``text`` itself when nothing was."""
    if len(text) <= max_chars and not bytes_cut:
        return text
    kept = text[:max_chars]
    cut = bytes_cut + len(text[max_chars:].encode("utf-8"))
    return f"{kept} [... {cut:,} bytes cut]"


class LineBudget:
    """A token bucket of lines: ``rate`` lines a second, ``burst`` at once (pure: the caller gives the time).

    Why the relay needs one: a trigger's log lines go to the triggerer's supervisor over a socket written
    without buffering, on the event loop. A pod flooding its log made the relay write faster than a busy
    supervisor reads; the socket filled, and one write then blocked every trigger of the triggerer for up
    to 0.95 s. Lines over the budget are counted and said, never written one by one.
    """

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = max(rate, 1e-9)
        self.burst = max(burst, 1.0)
        self._tokens = self.burst
        self._at = now

    def take(self, now: float) -> bool:
        """Whether one more line fits the budget at ``now`` (and spend it if so)."""
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
