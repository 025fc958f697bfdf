"""Label and field selectors: grammar, matching and error texts as kube-apiserver has them."""

from __future__ import annotations

import pytest

from airflow_k8s_ml.k8s.selectors import (
    LabelSelector,
    Operator,
    SelectorError,
    label_selector_from_match,
    label_selector_from_set,
    parse_label_selector,
)
from airflow_k8s_ml.testbed.local_cluster.selectors import (
    FIELDS_BY_RESOURCE,
    FieldSelector,
    parse_field_selector,
    supported_fields,
)

LABELS = {"app": "web", "tier": "frontend", "version": "3", "empty": ""}


# ------------------------------------------------------------------------------------------ label grammar


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        # empty selects everything
        ("", {}, True),
        ("   ", LABELS, True),
        # equality, three spellings
        ("app=web", LABELS, True),
        ("app==web", LABELS, True),
        ("app=api", LABELS, False),
        ("app=web", {}, False),
        ("app!=api", LABELS, True),
        ("app!=web", LABELS, False),
        ("app!=web", {}, True),  # != matches objects without the key
        ("missing!=x", LABELS, True),
        # existence
        ("app", LABELS, True),
        ("missing", LABELS, False),
        ("!missing", LABELS, True),
        ("!app", LABELS, False),
        ("empty", LABELS, True),  # present with an empty value still exists
        # set-based
        ("app in (web,api)", LABELS, True),
        ("app in (api,db)", LABELS, False),
        ("app in (web)", {}, False),
        ("app notin (api,db)", LABELS, True),
        ("app notin (web)", LABELS, False),
        ("missing notin (a,b)", LABELS, True),  # notin matches objects without the key
        ("empty in ()", LABELS, True),  # () is the set {""}
        ("empty in (,x)", LABELS, True),
        ("app in (x,)", LABELS, False),
        ("app in (x,,web)", LABELS, True),
        # whitespace tolerance
        ("  app  =  web  ", LABELS, True),
        ("app in ( web , api )", LABELS, True),
        ("app\tin\t(web)", LABELS, True),
        ("app  notin(api)", LABELS, True),
        ("app in(web),tier in (frontend)", LABELS, True),
        # AND of requirements
        ("app=web,tier=frontend", LABELS, True),
        ("app=web,tier=backend", LABELS, False),
        ("app=web, !missing, tier notin (backend), version in (1,2,3)", LABELS, True),
        ("app=web,app=api", LABELS, False),
        # empty value after an operator means the empty string
        ("empty=", LABELS, True),
        ("app=", LABELS, False),
        ("empty=,app=web", LABELS, True),
        # keywords are identifiers in value position
        ("in in (in)", {"in": "in"}, True),
        ("notin=notin", {"notin": "notin"}, True),
        # prefixed keys and dotted values
        ("example.com/team=ml-ops_1.x", {"example.com/team": "ml-ops_1.x"}, True),
        # numeric comparisons
        ("version>2", LABELS, True),
        ("version>3", LABELS, False),
        ("version<4", LABELS, True),
        ("version>0", LABELS, True),
        ("app>1", LABELS, False),  # non-integer label value never matches
        ("missing<10", LABELS, False),
    ],
)
def test_label_selector_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a in", "unable to parse requirement: found '' expected: '('"),
        ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("(a)", "found '(', expected: !, identifier, or 'end of string'"),
        (
            "k>x",
            'unable to parse requirement: values[0]: Invalid value: "x": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ],
)
def test_label_selector_syntax_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_label_selector(text)
    assert caught.value.message == message
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("-bad=x", '<nil>: Invalid value: "-bad": name part must consist of alphanumeric characters'),
        ("Foo.com/x=y", '<nil>: Invalid value: "Foo.com/x": prefix part a lowercase RFC 1123 subdomain'),
        ("/x=y", "prefix part must be non-empty"),
        ("a/b/c=y", "a qualified name must consist of"),
        ("x" * 64 + "=y", "name part must be no more than 63 characters"),
        ("a=b/c", 'values[0][a]: Invalid value: "b/c": a valid label must be an empty string'),
        ("a in (ok,-bad)", 'values[0][a]: Invalid value: "-bad"'),
        ("a=" + "v" * 64, "must be no more than 63 characters"),
        ("k>-1", 'values[0][k]: Invalid value: "-1"'),  # values are label values, so no negative numbers
    ],
)
def test_label_selector_validation_errors(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_label_selector(text)
    assert caught.value.message.startswith("unable to parse requirement: ")
    assert fragment in caught.value.message


def test_validation_message_reproduces_upstream_regex_error_text() -> None:
    with pytest.raises(SelectorError) as caught:
        parse_label_selector("a=b/c")
    assert caught.value.message == (
        'unable to parse requirement: values[0][a]: Invalid value: "b/c": '
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character "
        "(e.g. 'MyValue',  or 'my_value',  or '12345', "
        "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    )


def test_selector_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_label_selector("a in")


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("b=2,a=1", "a=1,b=2"),
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
        ("  app in ( b , a , a ) , !tier ", "app in (a,b),!tier"),
        ("k==v,k2!=v2", "k==v,k2!=v2"),
        ("n>5,m<3", "m<3,n>5"),
    ],
)
def test_label_selector_string_is_canonical(text: str, canonical: str) -> None:
    assert str(parse_label_selector(text)) == canonical


def test_parsed_requirements_are_exposed() -> None:
    selector = parse_label_selector("app in (b,a),!gone")
    assert [(r.key, r.operator, r.values) for r in selector.requirements] == [
        ("app", Operator.IN, ("a", "b")),
        ("gone", Operator.DOES_NOT_EXIST, ()),
    ]
    assert not selector.empty
    assert parse_label_selector("").empty


def test_matches_accepts_none_labels() -> None:
    assert parse_label_selector("!app").matches(None)
    assert not parse_label_selector("app").matches(None)


# ------------------------------------------------------------------------------- metav1.LabelSelector


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, LABELS, False),  # a missing selector selects nothing
        (None, {}, False),
        ({}, LABELS, True),  # an empty one selects everything
        ({"matchLabels": {}, "matchExpressions": []}, {}, True),
        ({"matchLabels": {"app": "web"}}, LABELS, True),
        ({"matchLabels": {"app": "web", "tier": "backend"}}, LABELS, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}, LABELS, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, LABELS, False),
        ({"matchExpressions": [{"key": "gone", "operator": "NotIn", "values": ["x"]}]}, LABELS, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, LABELS, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, LABELS, False),
        ({"matchExpressions": [{"key": "gone", "operator": "DoesNotExist", "values": None}]}, LABELS, True),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend"]}],
            },
            LABELS,
            True,
        ),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["backend"]}],
            },
            LABELS,
            False,
        ),
    ],
)
def test_label_selector_from_match(selector: dict | None, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_from_match(selector).matches(labels) is expected


def test_label_selector_from_match_string_form() -> None:
    selector = label_selector_from_match(
        {"matchLabels": {"job-name": "pi"}, "matchExpressions": [{"key": "a", "operator": "Exists"}]}
    )
    assert str(selector) == "a,job-name=pi"


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            '"Gt" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist',
        ),
        ({"matchLabels": {"bad key": "v"}}, 'key: Invalid value: "bad key": name part must consist of'),
    ],
)
def test_label_selector_from_match_errors(selector: dict, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        label_selector_from_match(selector)
    assert caught.value.message.startswith(message)


def test_label_selector_from_set() -> None:
    selector = label_selector_from_set({"b": "2", "a": "1"})
    assert str(selector) == "a=1,b=2"
    assert selector.matches({"a": "1", "b": "2", "c": "3"})
    assert not selector.matches({"a": "1"})
    assert label_selector_from_set(None).matches({})
    assert label_selector_from_set({}).empty


def test_everything_and_nothing() -> None:
    assert LabelSelector.everything().matches({"a": "b"})
    assert not LabelSelector.nothing().matches({})
    assert not LabelSelector.nothing().empty


# ------------------------------------------------------------------------------------------ field selectors

POD = {
    "metadata": {"name": "pi-abc", "namespace": "default"},
    "spec": {"nodeName": "local", "restartPolicy": "Never"},
    "status": {"phase": "Running"},
}
EVENT = {
    "metadata": {"name": "pi.1", "namespace": "default"},
    "involvedObject": {"kind": "Job", "name": "pi", "namespace": "default", "uid": "u-1"},
    "reason": "SuccessfulCreate",
    "type": "Normal",
    "source": {"component": "job-controller"},
}
PODS = supported_fields("pods")


@pytest.mark.parametrize(
    ("text", "obj", "expected"),
    [
        ("", POD, True),
        ("metadata.name=pi-abc", POD, True),
        ("metadata.name==pi-abc", POD, True),
        ("metadata.name=other", POD, False),
        ("metadata.name!=other", POD, True),
        ("metadata.namespace=default,status.phase=Running", POD, True),
        ("metadata.namespace=default,status.phase=Pending", POD, False),
        ("status.phase!=Succeeded,status.phase!=Failed", POD, True),
        ("spec.nodeName=local", POD, True),
        ("spec.nodeName=", {"metadata": {"name": "p"}}, True),  # missing field is the empty string
        ("spec.nodeName!=", {"metadata": {"name": "p"}}, False),
        ("status.podIP=", POD, True),
        ("spec.restartPolicy=Never", POD, True),
        # escaping: \, \= and \\ are data
        (r"metadata.name=a\,b", {"metadata": {"name": "a,b"}}, True),
        (r"metadata.name=a\=b", {"metadata": {"name": "a=b"}}, True),
        (r"metadata.name=a\\b", {"metadata": {"name": "a\\b"}}, True),
        (r"metadata.name=a\,b,metadata.namespace=ns", {"metadata": {"name": "a,b", "namespace": "ns"}}, True),
        (r"metadata.name=a\,b", {"metadata": {"name": "a"}}, False),
        ("metadata.name=x,,", {"metadata": {"name": "x"}}, True),  # empty terms are skipped
    ],
)
def test_field_selector_on_pods(text: str, obj: dict, expected: bool) -> None:
    assert parse_field_selector(text, PODS).matches(obj) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("involvedObject.kind=Job,involvedObject.name=pi", True),
        ("involvedObject.namespace=default,involvedObject.uid=u-1", True),
        ("involvedObject.kind=Pod", False),
        ("involvedObject.fieldPath=", True),
        ("reason=SuccessfulCreate,type=Normal", True),
        ("type=Warning", False),
        ("source=job-controller", True),  # source means source.component
        ("reportingComponent=", True),
    ],
)
def test_field_selector_on_events(text: str, expected: bool) -> None:
    assert parse_field_selector(text, supported_fields("events")).matches(EVENT) is expected


def test_event_source_falls_back_to_reporting_component() -> None:
    event = {"reportingComponent": "kubelet", "source": {}}
    assert parse_field_selector("source=kubelet", supported_fields("events")).matches(event)
    assert parse_field_selector("reportingComponent=kubelet", supported_fields("events")).matches(event)


@pytest.mark.parametrize(
    ("status", "text", "expected"),
    [
        ({"succeeded": 1}, "status.successful=1", True),
        ({"succeeded": 1.0}, "status.successful=1", True),
        ({"succeeded": 2}, "status.successful=1", False),
        ({}, "status.successful=0", True),  # int32 field defaults to 0 upstream
        ({"succeeded": 0}, "status.successful!=0", False),
    ],
)
def test_field_selector_on_jobs_reads_succeeded(status: dict, text: str, expected: bool) -> None:
    job = {"metadata": {"name": "pi"}, "status": status}
    assert parse_field_selector(text, supported_fields("jobs")).matches(job) is expected


def test_field_selector_on_secrets_and_booleans() -> None:
    secret = {"metadata": {"name": "s"}, "type": "kubernetes.io/tls"}
    assert parse_field_selector("type=kubernetes.io/tls", supported_fields("secrets")).matches(secret)
    flagged = {"spec": {"hostNetwork": True}}
    assert parse_field_selector("spec.hostNetwork=true", {"spec.hostNetwork"}).matches(flagged)


@pytest.mark.parametrize(
    ("text", "plural", "message"),
    [
        ("foo=bar", "pods", "field label not supported: foo"),
        ("status.phase=Running", "configmaps", "field label not supported: status.phase"),
        ("status.phase=Running", "jobs", "field label not supported: status.phase"),
        ("metadata.name=a,spec.foo=b", "pods", "field label not supported: spec.foo"),
        (" metadata.name=a", "pods", "field label not supported:  metadata.name"),  # no trimming upstream
        ("metadata.name", "pods", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("metadata.name=a,b", "pods", "invalid selector: 'metadata.name=a,b'; can't understand 'b'"),
        (r"metadata.name=a\x", "pods", r"invalid field selector: invalid escape sequence: \x"),
        ("metadata.name=a\\", "pods", "invalid field selector: invalid escape sequence: \\"),
        ("metadata.name=a=b", "pods", "invalid field selector: unescaped character in value: 61"),
        ("foo=a=b", "pods", "invalid field selector: unescaped character in value: 61"),  # syntax first
    ],
)
def test_field_selector_errors(text: str, plural: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_field_selector(text, supported_fields(plural))
    assert caught.value.message == message


def test_field_selector_string_and_exact_match() -> None:
    selector = parse_field_selector(r"metadata.name==a\,b,status.phase!=Failed", PODS)
    assert str(selector) == r"metadata.name=a\,b,status.phase!=Failed"
    assert selector.requires_exact_match("metadata.name") == "a,b"
    assert selector.requires_exact_match("status.phase") is None
    assert parse_field_selector("", PODS).empty
    assert FieldSelector().matches({})


def test_supported_fields_table() -> None:
    common = {"metadata.name", "metadata.namespace"}
    assert supported_fields("configmaps") == common
    assert supported_fields("pytorchjobs") == common
    assert {
        "status.phase",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.podIP",
        "status.nominatedNodeName",
    } <= supported_fields("pods")
    assert {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    } <= supported_fields("events")
    assert supported_fields("jobs") == common | {"status.successful"}
    assert supported_fields("secrets") == common | {"type"}
    assert all(common <= fields for fields in FIELDS_BY_RESOURCE.values())
