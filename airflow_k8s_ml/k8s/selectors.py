"""Label selectors parsed and matched the way the Kubernetes apiserver does it.

Why a port rather than a regex: clients (kubectl, the Python clients, Airflow's cncf provider, our own
triggers) send the whole grammar (``k in (a,b)``, ``!k``, ``notin``) and rely on its edge cases, e.g.
``k!=v`` and ``k notin (...)`` *match* objects that lack the key. A lookalike parser that disagrees with
the real server makes tests pass locally and fail on a cluster, so the lexer, parser, validation and error
texts below follow ``k8s.io/apimachinery/pkg/labels/selector.go`` closely. :func:`format_label_selector`
is the ``k=v,k=v`` form our clients send. Pure: no I/O, stdlib only.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_k8s_ml.k8s.names import label_value_errors, qualified_name_errors

__all__ = [
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "format_label_selector",
    "go_quote",
    "label_selector_from_match",
    "label_selector_from_set",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A selector that does not parse, or names a field the resource cannot be filtered by.

    The local cluster answers it with a 400 BadRequest Status whose message is :attr:`message`, verbatim,
    because clients and humans grep for the upstream texts (``unable to parse requirement: ...``,
    ``field label not supported: x``).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def go_quote(value: str) -> str:
    """Approximate Go's ``%q`` (JSON string quoting agrees with it for printable text)."""
    return json.dumps(value, ensure_ascii=False)


def _invalid(path: str, bad_value: str, detail: str) -> str:
    """One ``field.Invalid`` error rendered like ``field.Error.Error()``."""
    return f"{path}: Invalid value: {bad_value}: {detail}"


def _aggregate(errors: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message alone, several in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# --------------------------------------------------------------------------------------------------------
# Label selector model
# --------------------------------------------------------------------------------------------------------


class Operator(enum.StrEnum):
    """``selection.Operator``; the values are the upstream spellings, used in error messages."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    GREATER_THAN = "gt"
    LESS_THAN = "lt"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


_BINARY_OPERATORS = ", ".join(
    op.value
    for op in (
        Operator.IN,
        Operator.NOT_IN,
        Operator.EQUALS,
        Operator.DOUBLE_EQUALS,
        Operator.NOT_EQUALS,
        Operator.GREATER_THAN,
        Operator.LESS_THAN,
    )
)
_SET_OPS = frozenset({Operator.IN, Operator.NOT_IN})
_EXACT_OPS = frozenset({Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS})
_UNARY_OPS = frozenset({Operator.EXISTS, Operator.DOES_NOT_EXIST})
_ORDER_OPS = frozenset({Operator.GREATER_THAN, Operator.LESS_THAN})
_INFIX = {
    Operator.EQUALS: "=",
    Operator.DOUBLE_EQUALS: "==",
    Operator.NOT_EQUALS: "!=",
    Operator.IN: " in ",
    Operator.NOT_IN: " notin ",
    Operator.GREATER_THAN: ">",
    Operator.LESS_THAN: "<",
}


def _parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``: optional sign and decimal digits only, within int64."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ANDed term of a label selector: ``key <operator> values``.

    ``values`` is sorted and de-duplicated like upstream's ``sets.String`` so that ``str()`` is canonical
    (the Scale subresource publishes it as ``status.selector``).
    """

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``Requirement.Matches``. Negative operators match when the key is absent, by design upstream."""
        present = self.key in labels
        op = self.operator
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return present
        if op is Operator.DOES_NOT_EXIST:
            return not present
        return present and self._compare(labels[self.key])

    def _compare(self, label_value: str) -> bool:
        """``gt``/``lt``: both sides must parse as int64, else the requirement does not match."""
        actual = _parse_int64(label_value)
        wanted = _parse_int64(self.values[0]) if len(self.values) == 1 else None
        if actual is None or wanted is None:
            return False
        return actual > wanted if self.operator is Operator.GREATER_THAN else actual < wanted

    def __str__(self) -> str:
        prefix = "!" if self.operator is Operator.DOES_NOT_EXIST else ""
        if self.operator in _UNARY_OPS:
            return prefix + self.key
        joined = ",".join(self.values)
        if self.operator in _SET_OPS:
            joined = f"({joined})"
        return f"{self.key}{_INFIX[self.operator]}{joined}"


def _go_string_slice(values: Sequence[str]) -> str:
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def _requirement_errors(key: str, op: Operator, values: Sequence[str], validate_key: bool) -> list[str]:
    """The checks of upstream ``NewRequirement`` (the parser validates the key itself, earlier)."""
    errs = []
    if validate_key and (key_errs := qualified_name_errors(key)):
        errs.append(_invalid("key", go_quote(key), "; ".join(key_errs)))
    shown = _go_string_slice(values)
    if op in _SET_OPS and not values:
        errs.append(_invalid("values", shown, "for 'in', 'notin' operators, values set can't be empty"))
    if op in _EXACT_OPS and len(values) != 1:
        errs.append(_invalid("values", shown, "exact-match compatibility requires one single value"))
    if op in _UNARY_OPS and values:
        errs.append(_invalid("values", shown, "values set must be empty for exists and does not exist"))
    if op in _ORDER_OPS:
        if len(values) != 1:
            errs.append(_invalid("values", shown, "for 'Gt', 'Lt' operators, exactly one value is required"))
        errs.extend(
            _invalid(f"values[{i}]", go_quote(v), "for 'Gt', 'Lt' operators, the value must be an integer")
            for i, v in enumerate(values)
            if _parse_int64(v) is None
        )
    for i, value in enumerate(values):
        if value_errs := label_value_errors(value):
            errs.append(_invalid(f"values[{i}][{key}]", go_quote(value), "; ".join(value_errs)))
    return errs


def _new_requirement(key: str, op: Operator, values: Sequence[str], validate_key: bool = True) -> Requirement:
    """Build a validated :class:`Requirement`; the value set is sorted/deduplicated as upstream."""
    canonical = tuple(sorted(set(values)))
    errs = _requirement_errors(key, op, canonical, validate_key)
    if errs:
        raise SelectorError(_aggregate(errs))
    return Requirement(key, op, canonical)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An AND of :class:`Requirement` s. No requirements selects everything.

    ``selects_nothing`` exists because a *missing* ``metav1.LabelSelector`` means "nothing" upstream
    (``labels.Nothing()``), which an empty requirement list cannot express.
    """

    requirements: tuple[Requirement, ...] = ()
    selects_nothing: bool = False

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def nothing(cls) -> LabelSelector:
        return cls(selects_nothing=True)

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (upstream ``Selector.Empty``)."""
        return not self.selects_nothing and not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with these labels (``None`` = no labels) is selected."""
        if self.selects_nothing:
            return False
        present = labels or {}
        return all(requirement.matches(present) for requirement in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


def _selector_of(requirements: list[Requirement]) -> LabelSelector:
    """Sort by key (stable) like upstream's ``ByKey`` so ``str()`` is deterministic."""
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


# --------------------------------------------------------------------------------------------------------
# Label selector lexer and parser (labels/selector.go: Lexer, Parser)
# --------------------------------------------------------------------------------------------------------


class _Tok(enum.Enum):
    END = "end"
    CLOSE_PAREN = ")"
    COMMA = ","
    NOT = "!"
    DOUBLE_EQUALS = "=="
    EQUALS = "="
    GREATER = ">"
    IDENTIFIER = "identifier"
    IN = "in"
    LESS = "<"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    OPEN_PAREN = "("


_LITERAL_TOKENS = {tok.value: tok for tok in _Tok if tok not in (_Tok.END, _Tok.IDENTIFIER)}
_SPECIAL_CHARS = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_OPERATOR_TOKENS = {
    _Tok.IN: Operator.IN,
    _Tok.EQUALS: Operator.EQUALS,
    _Tok.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Tok.GREATER: Operator.GREATER_THAN,
    _Tok.LESS: Operator.LESS_THAN,
    _Tok.NOT_IN: Operator.NOT_IN,
    _Tok.NOT_EQUALS: Operator.NOT_EQUALS,
}


def _scan_special(text: str, pos: int) -> tuple[_Tok, str, int]:
    """Longest run of special characters that still spells a token (``!=`` rather than ``!``)."""
    end, found = pos, pos
    while end < len(text) and text[end] in _SPECIAL_CHARS:
        end += 1
        if text[pos:end] in _LITERAL_TOKENS:
            found = end
        else:
            break
    literal = text[pos:found]
    return _LITERAL_TOKENS[literal], literal, found


def _scan_word(text: str, pos: int) -> tuple[_Tok, str, int]:
    """An identifier runs to the next whitespace or special character; ``in``/``notin`` are keywords."""
    end = pos
    while end < len(text) and text[end] not in _SPECIAL_CHARS and text[end] not in _WHITESPACE:
        end += 1
    word = text[pos:end]
    return _LITERAL_TOKENS.get(word, _Tok.IDENTIFIER), word, end


def _lex(text: str) -> Iterator[tuple[_Tok, str]]:
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text):
            yield _Tok.END, ""
            return
        scan = _scan_special if text[pos] in _SPECIAL_CHARS else _scan_word
        tok, literal, pos = scan(text, pos)
        yield tok, literal


class _LabelParser:
    """Recursive-descent parser over the scanned tokens, with upstream's two contexts.

    In the *values* context the keywords ``in``/``notin`` are plain identifiers, so ``in in (in)`` is a
    valid selector upstream and here.
    """

    def __init__(self, text: str) -> None:
        self._items = list(_lex(text))
        self._pos = 0

    def _peek(self, values: bool = True) -> tuple[_Tok, str]:
        return self._as_context(self._items[self._pos], values)

    def _take(self, values: bool = True) -> tuple[_Tok, str]:
        item = self._items[self._pos]
        self._pos += 1
        return self._as_context(item, values)

    @staticmethod
    def _as_context(item: tuple[_Tok, str], values: bool) -> tuple[_Tok, str]:
        tok, literal = item
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            return _Tok.IDENTIFIER, literal
        return tok, literal

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, literal = self._peek()
            if tok is _Tok.END:
                return requirements
            if tok not in (_Tok.IDENTIFIER, _Tok.NOT):
                raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except SelectorError as err:
                raise SelectorError(f"unable to parse requirement: {err.message}") from None
            tok, literal = self._take()
            if tok is _Tok.END:
                return requirements
            if tok is not _Tok.COMMA:
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            next_tok, next_literal = self._peek()
            if next_tok not in (_Tok.IDENTIFIER, _Tok.NOT):
                raise SelectorError(f"found '{next_literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        key, unary = self._key_and_inferred_operator()
        if unary is not None:
            return _new_requirement(key, unary, (), validate_key=False)
        operator = self._operator()
        values = self._value_set() if operator in _SET_OPS else self._exact_value()
        return _new_requirement(key, operator, values, validate_key=False)

    def _key_and_inferred_operator(self) -> tuple[str, Operator | None]:
        """``[!] KEY``; a key followed by ``,`` or the end is an existence test."""
        tok, literal = self._take()
        negated = tok is _Tok.NOT
        if negated:
            tok, literal = self._take()
        if tok is not _Tok.IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        if key_errs := qualified_name_errors(literal):
            raise SelectorError(_invalid("<nil>", go_quote(literal), "; ".join(key_errs)))
        if negated:
            return literal, Operator.DOES_NOT_EXIST
        if self._peek()[0] in (_Tok.END, _Tok.COMMA):
            return literal, Operator.EXISTS
        return literal, None

    def _operator(self) -> Operator:
        tok, literal = self._take(values=False)
        if tok not in _OPERATOR_TOKENS:
            raise SelectorError(f"found '{literal}', expected: {_BINARY_OPERATORS}")
        return _OPERATOR_TOKENS[tok]

    def _value_set(self) -> list[str]:
        """``( v1, v2, ... )``; empty members are the empty string, so ``()`` means ``{""}``."""
        tok, literal = self._take()
        if tok is not _Tok.OPEN_PAREN:
            raise SelectorError(f"found '{literal}' expected: '('")
        tok, literal = self._peek()
        if tok is _Tok.CLOSE_PAREN:
            self._take()
            return [""]
        if tok not in (_Tok.IDENTIFIER, _Tok.COMMA):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self._identifier_list()
        self._take()  # the ')' that ended the list
        return values

    def _identifier_list(self) -> list[str]:
        values: list[str] = []
        while True:
            tok, literal = self._take()
            if tok is _Tok.IDENTIFIER:
                values.append(literal)
                next_tok, next_literal = self._peek()
                if next_tok is _Tok.CLOSE_PAREN:
                    return values
                if next_tok is not _Tok.COMMA:
                    raise SelectorError(f"found '{next_literal}', expected: ',' or ')'")
            elif tok is _Tok.COMMA:
                if not values:
                    values.append("")  # "(,"
                next_tok, _ = self._peek()
                if next_tok is _Tok.CLOSE_PAREN:
                    values.append("")  # ",)"
                    return values
                if next_tok is _Tok.COMMA:
                    self._take()
                    values.append("")  # ",,"
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def _exact_value(self) -> list[str]:
        """The single value after ``=``/``==``/``!=``/``>``/``<``; nothing at all means the empty string."""
        tok, _ = self._peek()
        if tok in (_Tok.END, _Tok.COMMA):
            return [""]
        tok, literal = self._take()
        if tok is not _Tok.IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return [literal]


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a ``labelSelector`` query parameter (empty or blank text selects everything).

    Raises :class:`SelectorError` with the upstream message for invalid syntax, keys or values.
    """
    return _selector_of(_LabelParser(text).parse())


def label_selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """Equality selector for a plain map such as a Service's ``spec.selector`` (empty = everything).

    Like upstream ``SelectorFromSet`` it does not validate: the map came from a stored object.
    """
    return _selector_of([Requirement(k, Operator.EQUALS, (v,)) for k, v in (labels or {}).items()])


_MATCH_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def label_selector_from_match(selector: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a ``metav1.LabelSelector`` dict (``matchLabels`` + ``matchExpressions``), as controllers use.

    Mirrors ``metav1.LabelSelectorAsSelector``: ``None`` selects nothing, ``{}`` selects everything.
    """
    if selector is None:
        return LabelSelector.nothing()
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    requirements = [_new_requirement(str(k), Operator.EQUALS, [str(v)]) for k, v in match_labels.items()]
    for expression in expressions:
        name = expression.get("operator")
        if name not in _MATCH_OPERATORS:
            raise SelectorError(f"{go_quote(str(name))} is not a valid label selector operator")
        values = [str(v) for v in expression.get("values") or []]
        requirements.append(_new_requirement(str(expression.get("key", "")), _MATCH_OPERATORS[name], values))
    return _selector_of(requirements)


def format_label_selector(labels: Mapping[str, str]) -> str:
    """The equality selector ``k=v,k=v`` for a label map, in the map's order (what list/watch calls send)."""
    return ",".join(f"{key}={value}" for key, value in labels.items())
