"""``Record``: the frozen value type the parse-time modules use instead of NamedTuple/dataclass."""

from __future__ import annotations

import copy
import pickle
from typing import ClassVar

import pytest

from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.k8s.record import Record


class Point(Record):
    x: int
    y: int = 0
    LABEL: ClassVar[str] = "point"


def test_binds_positional_keyword_and_default_arguments() -> None:
    assert (Point(1).x, Point(1).y) == (1, 0)
    assert Point(1, 2) == Point(x=1, y=2) == Point(1, y=2)
    assert Point._fields == ("x", "y")
    assert Point(3, 4)._asdict() == {"x": 3, "y": 4}
    x, y = Point(5, 6)
    assert (x, y) == (5, 6)
    assert Point(1)._replace(y=9) == Point(1, 9)
    assert repr(Point(1, 2)) == "Point(x=1, y=2)"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "missing required argument 'x'"),
        ((1, 2, 3), {}, "takes 2 arguments, got 3"),
        ((1,), {"x": 2}, "multiple values for argument 'x'"),
        ((1,), {"z": 2}, "unexpected argument 'z'"),
    ],
)
def test_refuses_bad_arguments_like_a_dataclass(
    args: tuple[int, ...], kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        Point(*args, **kwargs)


def test_is_frozen_hashable_and_survives_copy_and_pickle() -> None:
    point = Point(1, 2)
    with pytest.raises(AttributeError):
        point.x = 3  # type: ignore[misc]
    assert {point: 1}[Point(1, 2)] == 1
    assert point != (1, 2)
    assert copy.deepcopy(point) == point == pickle.loads(pickle.dumps(point))
    deadlines = Deadlines.parse(run_timeout=60)
    assert pickle.loads(pickle.dumps(deadlines)) == deadlines
    assert not deadlines.is_empty() and Deadlines().is_empty()


def test_a_required_field_after_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="follows a default"):

        class Bad(Record):
            a: int = 0
            b: int  # type: ignore[misc]
