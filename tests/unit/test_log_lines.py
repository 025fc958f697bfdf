"""Pod log bytes to bounded lines: any chunking gives the same lines, long lines keep their head and count
the rest, the cut marker says how much."""

from __future__ import annotations

from airflow_k8s_ml.triggers.log_lines import LineBudget, LineSplitter, cut_line


def _split(data: bytes, keep: int, size: int) -> list[tuple[bytes, int]]:
    splitter = LineSplitter(keep)
    lines = [line for i in range(0, len(data), size) for line in splitter.feed(data[i : i + size])]
    last = splitter.end()
    return lines + ([last] if last else [])


def test_any_chunking_gives_the_same_lines() -> None:
    data = b"a\nbb\n\n" + b"c" * 50 + b"\ntail"
    expected = [(b"a", 0), (b"bb", 0), (b"", 0), (b"c" * 10, 40), (b"tail", 0)]
    for size in (1, 2, 3, 7, 64, 1000):
        assert _split(data, 10, size) == expected


def test_a_stream_ending_on_a_newline_has_no_last_partial_line() -> None:
    splitter = LineSplitter(10)
    assert list(splitter.feed(b"x\n")) == [(b"x", 0)]
    assert splitter.end() is None


def test_a_ten_megabyte_line_is_never_held() -> None:
    splitter = LineSplitter(100)
    for _ in range(10):
        assert list(splitter.feed(b"x" * 1_000_000)) == []
    assert list(splitter.feed(b"\nnext\n")) == [(b"x" * 100, 9_999_900), (b"next", 0)]


def test_cut_marker() -> None:
    assert cut_line("short", 0, 10) == "short"
    assert cut_line("x" * 12, 0, 10) == "x" * 10 + " [... 2 bytes cut]"
    assert cut_line("x" * 10, 5_000, 10) == "x" * 10 + " [... 5,000 bytes cut]"
    assert cut_line("é" * 11, 0, 10) == "é" * 10 + " [... 2 bytes cut]"


def test_the_line_budget_allows_a_burst_then_the_rate() -> None:
    budget = LineBudget(rate=10, burst=5, now=0.0)
    assert [budget.take(0.0) for _ in range(6)] == [True] * 5 + [False]
    assert budget.take(0.05) is False  # half a line earned
    assert budget.take(0.1) is True  # one line a tenth of a second
    assert [budget.take(100.0) for _ in range(6)] == [True] * 5 + [False]  # never more than the burst
