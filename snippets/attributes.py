"""Info-string grammar: the language word and the attributes after it (docs/snippets.md).

An info string is split into words by a small tokenizer (bare words, `key=value`,
`key="quoted value"` with `\\"` escapes). Every word is then checked against the
closed set of attributes; anything unknown, repeated or malformed is an
`InfoStringError` naming what is wrong, so that a typo can never silently turn
a block into an unchecked one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from snippets.architectures import KNOWN_ARCHITECTURES, normalize_architecture, target_of

LANGUAGES: dict[str, str] = {"cuda": "cuda", "cu": "cuda", "c++": "cpp", "cpp": "cpp", "ptx": "ptx", "python": "python"}
"""Info-string first word → snippet language. Any other first word is prose."""

MODES: tuple[str, ...] = ("run", "compile", "compile_fail", "sketch")
"""Mutually exclusive verification modes."""

DEFAULT_RUN_TIMEOUT_S = 30
"""Wall-clock limit of a run step when the block gives no `timeout=`."""

MAX_RUN_TIMEOUT_S = 600
"""Largest `timeout=` an author may ask for."""

NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
"""What an `id=` / `uses=` name may look like."""

DEFINE_VALUE_CHARS = "A-Za-z0-9_.+-"
"""The only characters a `-DNAME=VALUE` value may hold: nothing a shell (nvcc runs its steps through
/bin/sh) or the compiler driver could read as anything but a word."""

_DEFINE = re.compile(r"-D([A-Za-z_][A-Za-z0-9_]*)(=[" + DEFINE_VALUE_CHARS + r"]*)?")

NVCC_OPTIONS: dict[str, str | None] = {
    "-O": r"[0-3]",
    "-std": r"c\+\+(17|20)",
    "-lineinfo": None,
    "--use_fast_math": None,
    "-use_fast_math": None,
    "-lcuda": None,
    "-rdc": r"true",
    "--extended-lambda": None,
    "--expt-relaxed-constexpr": None,
    "-maxrregcount": r"(1[6-9]|[2-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])",
}
"""The closed vocabulary of `flags=` besides -D: option → the regex its value must match in full (`-O3`,
`-std=c++20`, `-maxrregcount=64`), or None for an option without a value. Checked by value, never by
shape: a flag is one of these or it is refused."""

MAX_PATTERN_CHARS = 256
"""Longest `sass=` / `ptx=` / `no_sass=` / `no_ptx=` regex (RE2 keeps matching linear; this keeps its program small)."""

RE2_MAX_MEM = 8 * 1024 * 1024
"""Memory RE2 may use for one compiled check pattern; a pattern needing more is refused."""

MAX_NCU_ASSERTIONS = 8
"""Most `ncu=` assertions one block may make (each is one metric Nsight Compute collects)."""

NCU_OPERATORS = ("==", "<=", ">=", "<", ">")
"""The comparisons an `ncu=` assertion may use (two-character ones first: the parser tries them in this order)."""

_NCU_ASSERTION = re.compile(r"([a-z0-9_.]{1,128})\s*(==|<=|>=|<|>)\s*([0-9]{1,18}(?:\.[0-9]{1,9})?)")
_NCU_KERNEL = re.compile(r"[A-Za-z0-9_]{1,128}")

_BARE = {"run", "compile", "sketch", "chain"}
_VALUED = {
    "compile_fail",
    "arch",
    "timeout",
    "output",
    "id",
    "uses",
    "flags",
    "sass",
    "no_sass",
    "ptx",
    "no_ptx",
    "ncu",
    "ncu-kernel",
}
_REPEATABLE = {"sass", "no_sass", "ptx", "no_ptx"}
KNOWN_ATTRIBUTES: frozenset[str] = frozenset(_BARE | _VALUED)
"""Every attribute the grammar knows."""


class InfoStringError(ValueError):
    """A malformed or unknown attribute; the message says which and why."""


@dataclass
class Attributes:
    """The attributes of one block, parsed and validated (mode not yet defaulted)."""

    mode: str | None = None  # run | compile | compile_fail | sketch, or None when not given
    expect: str | None = None  # compile_fail's expected compiler text
    arch: list[str] | None = None  # normalized architectures from arch=, e.g. ["sm90a"]
    timeout: int | None = None  # run step wall-clock seconds
    output: str | None = None  # text the program's stdout must contain
    name: str | None = None  # id=NAME
    uses: list[str] = field(default_factory=list)  # uses=NAME,NAME
    chain: bool = False  # prepend every eligible earlier block
    flags: list[str] = field(default_factory=list)  # allow-listed extra nvcc flags
    sass: list[str] = field(default_factory=list)  # regexes the SASS must match
    no_sass: list[str] = field(default_factory=list)  # regexes the SASS must not match
    ptx: list[str] = field(default_factory=list)  # regexes the PTX must match
    no_ptx: list[str] = field(default_factory=list)  # regexes the PTX must not match
    ncu: list[str] = field(default_factory=list)  # Nsight Compute assertions, each "METRIC OP VALUE"
    ncu_kernel: str | None = None  # ncu-kernel=NAME: only kernels whose name contains NAME are profiled

    def to_dict(self) -> dict[str, Any]:
        """Only the attributes that were given (JSON-safe)."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            if value in (None, False, [], ""):
                continue
            out[key] = list(value) if isinstance(value, list) else value
        return out


def language_of(info: str) -> tuple[str | None, str, str]:
    """(normalized language or None for prose, the word as written, the rest of the info string)."""
    info = info.strip()
    if not info:
        return None, "", ""
    parts = info.split(None, 1)  # any whitespace (tabs too) separates the language word
    word = parts[0]
    rest = parts[1] if len(parts) > 1 else ""
    return LANGUAGES.get(word.lower()), word, rest


def tokenize(text: str) -> list[tuple[str, str | None]]:
    """Split attributes into (key, value-or-None); quoted values may hold spaces and `\\"`."""
    tokens: list[tuple[str, str | None]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        start = i
        while i < n and not text[i].isspace() and text[i] != "=":
            if text[i] == '"':
                raise InfoStringError(f"unexpected quote in attribute name near '{text[start : i + 1]}'")
            i += 1
        key = text[start:i]
        if not key:
            raise InfoStringError(f"attribute value without a name near '{text[start : start + 20]}'")
        if i >= n or text[i] != "=":
            tokens.append((key, None))
            continue
        i += 1  # skip '='
        if i < n and text[i] == '"':
            i += 1
            buf: list[str] = []
            while True:
                if i >= n:
                    raise InfoStringError(f'unclosed quote in {key}="…')
                ch = text[i]
                if ch == "\\" and i + 1 < n and text[i + 1] in ('"', "\\"):
                    buf.append(text[i + 1])
                    i += 2
                    continue
                if ch == '"':
                    i += 1
                    break
                buf.append(ch)
                i += 1
            if i < n and not text[i].isspace():
                raise InfoStringError(f"{key}=\"…\" must be followed by a space, not '{text[i]}'")
            tokens.append((key, "".join(buf)))
        else:
            vstart = i
            while i < n and not text[i].isspace():
                if text[i] == '"':
                    raise InfoStringError(f'stray quote in the value of {key}= (quote the whole value: {key}="…")')
                i += 1
            tokens.append((key, text[vstart:i]))
    return tokens


def _names(key: str, value: str) -> list[str]:
    names = [v.strip() for v in value.split(",")]
    if not value or any(not v for v in names):
        raise InfoStringError(f"{key}= needs a comma-separated list of names, got '{value}'")
    for name in names:
        if not NAME_PATTERN.match(name):
            raise InfoStringError(f"{key}=: '{name}' is not a valid block name (letters, digits, _ . -)")
    return names


def compile_check(pattern: str) -> Any:
    """`pattern` compiled by RE2 (linear-time matching, `^`/`$` at line ends); InfoStringError when it is too long
    or RE2 cannot take it (backreferences, lookaround). The one rule for sass=/ptx= patterns: the linter and
    the runner both call it."""
    import re2  # google-re2: imported here, not at import time of the grammar

    if len(pattern) > MAX_PATTERN_CHARS:
        raise InfoStringError(f"the pattern is {len(pattern)} characters long (at most {MAX_PATTERN_CHARS})")
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False
    try:
        return re2.compile("(?m)" + pattern, options=options)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise InfoStringError(f"RE2 cannot take this pattern ({why}): no backreferences or lookaround") from None


def _regex(key: str, value: str) -> str:
    if not value:
        raise InfoStringError(f"{key}= needs a regular expression")
    try:
        compile_check(value)
    except InfoStringError as exc:
        raise InfoStringError(f'{key}="{value[:80]}": {exc}') from None
    return value


def check_flag(flag: str) -> None:
    """Refuse a `flags=` word that is not in the closed vocabulary (InfoStringError naming it and the attribute)."""
    if _DEFINE.fullmatch(flag):
        return
    for option, value in NVCC_OPTIONS.items():
        if value is None:
            if flag == option:
                return
            continue
        sep = "" if option == "-O" else "="
        if flag.startswith(option + sep) and re.fullmatch(value, flag[len(option + sep) :]):
            return
    raise InfoStringError(
        f"flags=: '{flag[:80]}' is not allowed (allowed: -DNAME or -DNAME=VALUE with VALUE from [{DEFINE_VALUE_CHARS}], "
        "-O0…-O3, -std=c++17, -std=c++20, -lineinfo, --use_fast_math, -lcuda, -rdc=true, --extended-lambda, "
        "--expt-relaxed-constexpr, -maxrregcount=16…255)"
    )


def parse_flags(value: str) -> list[str]:
    """Split `flags="…"` at whitespace (no shell quoting: no quote can be part of a flag) and check every word."""
    flags = value.split()
    if not flags:
        raise InfoStringError("flags= is empty")
    for flag in flags:
        check_flag(flag)
    return flags


def parse_ncu(value: str) -> list[str]:
    """Split `ncu="METRIC OP VALUE; …"` at `;` and check each assertion by value: a metric name from [a-z0-9_.],
    one of `NCU_OPERATORS`, a plain decimal number; at most `MAX_NCU_ASSERTIONS`. Returns them normalised
    ("METRIC OP VALUE", single spaces). Nothing else can reach the ncu command line."""
    parts = [p.strip() for p in value.split(";")]
    if not value.strip() or any(not p for p in parts):
        raise InfoStringError('ncu= needs assertions "METRIC OP VALUE", separated by ";"')
    if len(parts) > MAX_NCU_ASSERTIONS:
        raise InfoStringError(f"ncu= makes {len(parts)} assertions (at most {MAX_NCU_ASSERTIONS})")
    out: list[str] = []
    for part in parts:
        m = _NCU_ASSERTION.fullmatch(part)
        if not m:
            raise InfoStringError(
                f"ncu=: '{part[:80]}' is not METRIC OP VALUE (metric from [a-z0-9_.], "
                f"operator one of {' '.join(NCU_OPERATORS)}, value a decimal number)"
            )
        out.append(f"{m.group(1)} {m.group(2)} {m.group(3)}")
    return out


def split_ncu(assertion: str) -> tuple[str, str, float]:
    """(metric, operator, value) of one assertion that `parse_ncu` accepted (InfoStringError otherwise)."""
    m = _NCU_ASSERTION.fullmatch(assertion)
    if not m:
        raise InfoStringError(f"ncu=: '{assertion[:80]}' is not METRIC OP VALUE")
    return m.group(1), m.group(2), float(m.group(3))


def check_ncu_kernel(value: str) -> str:
    """An `ncu-kernel=` name: [A-Za-z0-9_] only (it becomes ncu's `-k regex:NAME`, so no regex syntax at all)."""
    if not _NCU_KERNEL.fullmatch(value):
        raise InfoStringError(f"ncu-kernel=: '{value[:80]}' is not a kernel name (letters, digits, _; at most 128)")
    return value


def check_snippet_rules(flags: list[str], checks: dict[str, list[str]]) -> None:
    """The grammar's rules for what reaches the compiler and the regex engine, applied again to a snippet that
    arrives from elsewhere (a queue job, a cache, a caller): every flag in the vocabulary, every check a pattern
    RE2 takes. InfoStringError names the attribute."""
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise InfoStringError("flags= must be a list of words")
    for flag in flags:
        check_flag(flag)
    if not isinstance(checks, dict):
        raise InfoStringError("the sass=/ptx= checks must be a mapping")
    for key, patterns in checks.items():
        if key not in _CHECK_KEYS:
            raise InfoStringError(f"unknown check '{key}' (known: {', '.join(sorted(_CHECK_KEYS))})")
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise InfoStringError(f"{key}= must be a list of patterns")
        if key == "ncu":
            if not patterns or parse_ncu("; ".join(patterns)) != patterns:
                raise InfoStringError("ncu= assertions must be written as parse_ncu normalises them")
            continue
        if key == "ncu_kernel":
            if len(patterns) != 1:
                raise InfoStringError("ncu-kernel= takes one name")
            check_ncu_kernel(patterns[0])
            continue
        for pattern in patterns:
            _regex(key, pattern)


_CHECK_KEYS = _REPEATABLE | {"ncu", "ncu_kernel"}
"""Keys of a snippet's `checks` mapping: the regex checks, the ncu assertions and the ncu kernel filter."""


def parse_attributes(text: str) -> Attributes:
    """Parse the attributes after the language word; raises InfoStringError on any problem."""
    attrs = Attributes()
    seen: set[str] = set()
    for key, value in tokenize(text):
        if key not in KNOWN_ATTRIBUTES:
            hint = ""
            close = [k for k in sorted(KNOWN_ATTRIBUTES) if k.replace("_", "") == key.replace("_", "").replace("-", "").lower()]
            if close:
                hint = f" (did you mean '{close[0]}'?)"
            raise InfoStringError(f"unknown attribute '{key}'{hint}")
        if key in seen and key not in _REPEATABLE:
            if key in MODES:
                raise InfoStringError(f"mode '{key}' is given twice")
            raise InfoStringError(f"attribute '{key}' is given twice")
        seen.add(key)
        if key in MODES:
            if attrs.mode is not None:
                raise InfoStringError(
                    f"more than one mode: '{attrs.mode}' and '{key}' (use at most one of run, compile, compile_fail, sketch)"
                )
            attrs.mode = key
        if key in _BARE:
            if value is not None:
                raise InfoStringError(f"'{key}' takes no value (write it as a bare word)")
            if key == "chain":
                attrs.chain = True
            continue
        if value is None:
            example = {"compile_fail": 'compile_fail="expected compiler text"', "arch": "arch=sm_90a,sm_100a"}.get(
                key, f"{key}=VALUE"
            )
            raise InfoStringError(f"'{key}' needs a value: {example}")
        if key == "compile_fail":
            if not value.strip():
                raise InfoStringError(
                    'compile_fail= needs the expected compiler text, e.g. compile_fail="not supported on .target"'
                )
            attrs.expect = value
        elif key == "arch":
            archs: list[str] = []
            for raw in value.split(","):
                norm = normalize_architecture(raw)
                if norm not in KNOWN_ARCHITECTURES:
                    raise InfoStringError(
                        f"arch=: unknown architecture '{raw.strip()}' (known: {', '.join(target_of(a) for a in KNOWN_ARCHITECTURES)})"
                    )
                if norm not in archs:
                    archs.append(norm)
            attrs.arch = archs
        elif key == "timeout":
            if not re.fullmatch(r"\d+", value):
                raise InfoStringError(f"timeout= must be a whole number of seconds, got '{value}'")
            seconds = int(value)
            if not 1 <= seconds <= MAX_RUN_TIMEOUT_S:
                raise InfoStringError(f"timeout={seconds} is out of range (1…{MAX_RUN_TIMEOUT_S} seconds)")
            attrs.timeout = seconds
        elif key == "output":
            if value == "":
                raise InfoStringError('output= needs the expected text, e.g. output="OK"')
            attrs.output = value
        elif key == "id":
            if "," in value:
                raise InfoStringError(f"id= takes one name, got '{value}'")
            attrs.name = _names("id", value)[0]
        elif key == "uses":
            attrs.uses = _names("uses", value)
        elif key == "flags":
            attrs.flags = parse_flags(value)
        elif key == "ncu":
            attrs.ncu = parse_ncu(value)
        elif key == "ncu-kernel":
            attrs.ncu_kernel = check_ncu_kernel(value)
        else:  # sass, no_sass, ptx, no_ptx
            getattr(attrs, key).append(_regex(key, value))
    return attrs
