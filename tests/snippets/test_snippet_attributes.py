"""The info-string grammar of docs/snippets.md: languages, modes, attributes and their errors."""

from __future__ import annotations

import pytest

from snippets.attributes import InfoStringError, language_of, parse_attributes, parse_flags, tokenize


def test_language_word_is_normalized_and_unknown_words_are_prose() -> None:
    assert language_of("cu run")[0] == "cuda"
    assert language_of("c++")[0] == "cpp"
    assert language_of("CUDA")[0] == "cuda"
    assert language_of("ptx")[0] == "ptx"
    assert language_of("python\tsketch") == ("python", "python", "sketch")
    assert language_of("bash")[0] is None
    assert language_of("")[0] is None


def test_quoted_values_keep_spaces_and_escaped_quotes() -> None:
    assert tokenize('run output="all 4096 \\"ok\\"" timeout=20') == [
        ("run", None),
        ("output", 'all 4096 "ok"'),
        ("timeout", "20"),
    ]


def test_all_documented_attributes_parse() -> None:
    attrs = parse_attributes(
        'run arch=sm_90a,SM100A timeout=20 output="OK" id=setup uses=a,b chain '
        'sass="UTMALDG" sass="HGMMA" no_sass="LDL" ptx="cp\\.async" no_ptx="ld\\.local" flags="-O3 -DN=4 -lcuda"'
    )
    assert attrs.mode == "run"
    assert attrs.arch == ["sm90a", "sm100a"]
    assert attrs.timeout == 20 and attrs.output == "OK"
    assert attrs.name == "setup" and attrs.uses == ["a", "b"] and attrs.chain
    assert attrs.sass == ["UTMALDG", "HGMMA"] and attrs.no_sass == ["LDL"]
    assert attrs.ptx == ["cp\\.async"] and attrs.no_ptx == ["ld\\.local"]
    assert attrs.flags == ["-O3", "-DN=4", "-lcuda"]


def test_compile_fail_needs_its_expected_text() -> None:
    assert parse_attributes('compile_fail="not supported on .target"').expect == "not supported on .target"
    with pytest.raises(InfoStringError, match="needs a value"):
        parse_attributes("compile_fail")


@pytest.mark.parametrize(
    ("info", "message"),
    [
        ("runn", "unknown attribute 'runn'"),
        ("run compile", "more than one mode"),
        ("run run", "given twice"),
        ("timeout=abc", "whole number"),
        ("timeout=601", "out of range"),
        ("arch=sm_91", "unknown architecture"),
        ('flags="-Xptxas -O0"', "not allowed"),
        ('flags="--compiler-bindir=/tmp"', "not allowed"),
        ('sass="("', "not a valid regular expression"),
        ('output="unclosed', "unclosed quote"),
        ("id=a,b", "one name"),
        ("uses=", "comma-separated"),
        ("run=1", "takes no value"),
        ("output=", "needs the expected text"),
        ('id=x"y', "stray quote"),
    ],
)
def test_malformed_attributes_are_errors(info: str, message: str) -> None:
    with pytest.raises(InfoStringError, match=message):
        parse_attributes(info)


def test_flag_allow_list() -> None:
    assert parse_flags("-O0 -std=c++20 -lineinfo --use_fast_math -DFOO -DBAR=1 -rdc=true") == [
        "-O0",
        "-std=c++20",
        "-lineinfo",
        "--use_fast_math",
        "-DFOO",
        "-DBAR=1",
        "-rdc=true",
    ]
    with pytest.raises(InfoStringError):
        parse_flags("-o /etc/passwd")
