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
        ('sass="("', "RE2 cannot take this pattern"),
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


@pytest.mark.parametrize(
    "flag",
    [
        "-DX=$(ln${IFS}-sf${IFS}/proc/self/environ${IFS}keep/0.ptx)",  # the fence: a shell command
        "-DX=`id`",
        "-DX=1;id",
        "-DX=1|id",
        "-DX=a&b",
        "-DX=<in",
        "-DX='q'",
        '-DX=\\"q\\"',
        "-DX=a\\b",
        "-DX=1,--compiler-bindir=/tmp",
        "-D9X=1",
        "-O4",
        "-std=c++98",
        "-maxrregcount=8",
        "-maxrregcount=64;id",
        "-Xcompiler",
        "-fplugin=x.so",
        "--compiler-bindir=/tmp",
        "-I/etc",
        "-include",
        "-o",
    ],
)
def test_flags_outside_the_vocabulary_are_refused_naming_the_attribute(flag: str) -> None:
    with pytest.raises(InfoStringError, match="flags=") as info:
        parse_attributes(f'compile flags="{flag}"')
    assert "not allowed" in str(info.value) or "quote" in str(info.value)


def test_flags_vocabulary_accepts_defines_and_named_options_with_valid_values() -> None:
    words = "-DN=4 -DNAME -DV=1.5e+3 -DT=a_b-c -O3 -std=c++17 -maxrregcount=128 --extended-lambda --expt-relaxed-constexpr"
    assert parse_flags(words) == words.split()


def test_check_snippet_rules_is_the_same_rule_for_snippets_from_elsewhere() -> None:
    from snippets.attributes import check_snippet_rules

    check_snippet_rules(["-DN=4"], {"sass": ["HGMMA"], "no_ptx": ["ld\\.local"]})
    with pytest.raises(InfoStringError, match="flags="):
        check_snippet_rules(["-DX=$(id)"], {})
    with pytest.raises(InfoStringError, match="ptx="):
        check_snippet_rules([], {"ptx": ["(?<=a)b"]})
    with pytest.raises(InfoStringError, match="unknown check"):
        check_snippet_rules([], {"output": ["x"]})


@pytest.mark.parametrize(
    ("info", "message"),
    [
        ('ptx="(a)\\\\1"', "RE2 cannot take"),
        ('sass="(?=x)"', "RE2 cannot take"),
        ('no_sass="(?<!x)y"', "RE2 cannot take"),
        ("ptx=" + "a" * 300, "characters long"),
    ],
)
def test_patterns_re2_cannot_take_are_errors(info: str, message: str) -> None:
    with pytest.raises(InfoStringError, match=message):
        parse_attributes(info)


def test_a_catastrophic_pattern_is_linear_under_re2() -> None:
    import time

    from snippets.attributes import compile_check

    pattern = compile_check("(a+)+Q")
    start = time.monotonic()
    assert pattern.search("a" * 200_000) is None
    assert time.monotonic() - start < 1.0
