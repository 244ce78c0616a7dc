"""Interpolation as compose does it: compose-go's own test table, ported.

Source: compose-spec/compose-go, template/template_test.go at
e70e961c3a3acebf0800b882f1afb3dbf1fb74a2. Where compose-go substitutes "" for an unset
variable, `substitute` does too and lists the name in `missing`; the reader refuses it only
where gpuplan reads the value (DESIGN.md), tested in test_compose.py.
"""

from __future__ import annotations

import pytest

from placement.check.compose.interpolation import MissingVariable, interpolate, substitute

DEFAULTS = {"FOO": "first", "BAR": "", "JSON": '{"json":2}'}


def sub(template: str) -> str:
    return substitute(template, DEFAULTS.get).text


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        # TestEscaped, TestSubstituteNoMatch, TestNonBraced
        ("$${foo}", "${foo}"),
        ("foo", "foo"),
        ("$FOO-bar", "first-bar"),
        # TestUnescaped
        ("a $ string", "a $ string"),
        ("^REGEX$", "^REGEX$"),
        ("$}", "$}"),
        ("$", "$"),
        # TestNoValueNoDefault, TestValueNoDefault
        ("This ${missing} var", "This  var"),
        ("This ${BAR} var", "This  var"),
        ("This $FOO var", "This first var"),
        ("This ${FOO} var", "This first var"),
        # TestNoValueWithDefault, TestLazyDefault*
        ("ok ${missing:-def}", "ok def"),
        ("ok ${missing-def}", "ok def"),
        ("${A:+${A},}B", "B"),
        ("${A:-${B}}", ""),
        # soft and hard defaults, presence values
        ("ok ${BAR:-def}", "ok def"),
        ("ok ${FOO:-def}", "ok first"),
        ("ok ${BAR-def}", "ok "),
        ("ok ${UNSET_VAR:+presence_value}", "ok "),
        ("ok ${UNSET_VAR+presence_value}", "ok "),
        ("ok ${FOO:+presence_value}", "ok presence_value"),
        ("ok ${FOO+presence_value}", "ok presence_value"),
        ("ok ${BAR+presence_value}", "ok presence_value"),
        ("ok ${BAR:+presence_value}", "ok "),
        ("ok ${BAR:-/non:-alphanumeric}", "ok /non:-alphanumeric"),
        # TestInterpolationExternalInterference
        ("-ok ${BAR:-defaultValue}", "-ok defaultValue"),
        ("+ok ${UNSET:-${BAR-defaultValue}}", "+ok "),
        ("-ok ${FOO:-defaultValue}", "-ok first"),
        (":-ok ${UNSET-defaultValue}", ":-ok defaultValue"),
        (":-ok ${BAR-defaultValue}", ":-ok "),
        (":?ok ${BAR-defaultValue}", ":?ok "),
        (":?ok ${BAR:-defaultValue}", ":?ok defaultValue"),
        (":+ok ${BAR:-defaultValue}", ":+ok defaultValue"),
        ("+ok ${BAR-defaultValue}", "+ok "),
        ("?ok ${BAR:-defaultValue}", "?ok defaultValue"),
        # TestDefaultsWithNestedExpansion
        ("ok ${UNSET_VAR-$FOO}", "ok first"),
        ("ok ${UNSET_VAR-${FOO}}", "ok first"),
        ("ok ${UNSET_VAR-${FOO} ${FOO}}", "ok first first"),
        ("ok ${BAR:-$FOO}", "ok first"),
        ("ok ${BAR:-${FOO}}", "ok first"),
        ("ok ${BAR:-${FOO} ${FOO}}", "ok first first"),
        ("ok ${BAR+$FOO}", "ok first"),
        ("ok ${BAR+$FOO ${FOO:+second}}", "ok first second"),
        # TestDefaultsForMandatoryVariables
        ("ok ${FOO:?err}", "ok first"),
        ("ok ${FOO?err}", "ok first"),
        ("ok ${BAR?err}", "ok "),
        # TestSubstituteWithReplacementFunc's last case
        ("ok ${SUBDOMAIN:-redis}.${FOO:?}", "ok redis.first"),
        # TestPrecedence
        ("${UNSET_VAR-myerror?msg}", "myerror?msg"),
        ("${FOO?bar-baz}", "first"),
        ("${BAR:-default_value_for_empty_var}", "default_value_for_empty_var"),
        ("${UNSET_VAR-default_value_for_unset_var}", "default_value_for_unset_var"),
        # TestNoValueWithCurlyBracesDefault, TestValueWithCurlyBracesDefault (issue 12)
        ('ok ${missing:-{"json":1}}', 'ok {"json":1}'),
        ('ok ${missing-{"json":1}}', 'ok {"json":1}'),
        ('ok ${JSON:-{"json":1}}', 'ok {"json":2}'),
        ('ok ${JSON-{"json":1}}', 'ok {"json":2}'),
    ],
)
def test_compose_go_substitution(template: str, expected: str) -> None:
    assert sub(template) == expected


@pytest.mark.parametrize("template", ["${", "${}", "${ }", "${ foo}", "${foo }", "${foo!}"])
def test_compose_go_invalid(template: str) -> None:
    with pytest.raises(ValueError, match="Invalid template"):
        sub(template)


@pytest.mark.parametrize(
    ("template", "name", "message"),
    [
        ("not ok ${UNSET_VAR:?Mandatory Variable Unset}", "UNSET_VAR", "Mandatory Variable Unset"),
        ("not ok ${BAR:?Mandatory Variable Empty}", "BAR", "Mandatory Variable Empty"),
        ("not ok ${UNSET_VAR:?}", "UNSET_VAR", None),
        ("not ok ${UNSET_VAR?Mandatory Variable Unset}", "UNSET_VAR", "Mandatory Variable Unset"),
        ("not ok ${UNSET_VAR?}", "UNSET_VAR", None),
        ("not ok ${UNSET_VAR:?Mandatory Variable ${FOO}}", "UNSET_VAR", "Mandatory Variable first"),
        ("not ok ${UNSET_VAR?Mandatory Variable ${FOO}}", "UNSET_VAR", "Mandatory Variable first"),
        ("${UNSET_VAR?bar-baz}", "UNSET_VAR", "bar-baz"),
    ],
)
def test_compose_go_mandatory(template: str, name: str, message: str | None) -> None:
    with pytest.raises(MissingVariable) as caught:
        sub(template)
    assert caught.value.name == name and caught.value.message == message
    assert caught.value.required


@pytest.mark.parametrize(
    ("template", "missing"),
    [
        ("This ${missing} var", ("missing",)),
        ("${A:-${B}}", ("B",)),  # compose warns when the lazy default is used…
        ("${A:+${A},}B", ()),  # …and not when it is not
        ("This ${BAR} var", ()),  # set, empty: not missing
        ("$X and ${Y:-y} and $Z", ("X", "Z")),
    ],
)
def test_unset_variables_are_listed(template: str, missing: tuple[str, ...]) -> None:
    assert substitute(template, DEFAULTS.get).missing == missing


def test_interpolate_refuses_an_unset_variable() -> None:
    with pytest.raises(MissingVariable) as caught:
        interpolate("--port ${PORT}", DEFAULTS.get)
    assert caught.value.name == "PORT" and not caught.value.required
    assert interpolate("--port ${PORT:-8000}", DEFAULTS.get) == "--port 8000"
