"""Blocks that declare nothing get honest statuses: programs run, units compile, fragments are unverified, Python is syntax-ok."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.status import LABEL, SYNTAX_OK, VERIFIED, summarize_snippet
from runner.verify import load_snippets, verify
from snippets.classify import FRAGMENT, FRAGMENT_REASON, PROGRAM, SCRIPT, UNIT, classify

REPO = Path(__file__).resolve().parents[1] / "fixtures" / "kwrepo"


@pytest.mark.parametrize(
    ("lang", "source", "kind"),
    [
        ("cuda", "__global__ void k(int* p) { p[threadIdx.x] = 1; }\n", UNIT),
        ("cuda", "int main() { return 0; }\n", PROGRAM),
        ("cuda", "float acc = 0.f;\nfor (int i = 0; i < n; ++i) acc += row[i];\n", FRAGMENT),
        ("cuda", 'asm volatile("bar.sync 0;");\n', FRAGMENT),
        ("cpp", "using M = cutlass::gemm::Collective<...>;\n", FRAGMENT),
        ("cpp", "using S = cutlass::gemm::Scheduler;\n", FRAGMENT),
        ("cpp", "template <typename... Ts> void f(Ts... ts) {}\n", UNIT),
        ("cuda", "namespace my { int x; }\nint y = my::x;\n", UNIT),
        ("cuda", "x = compute(y);\n", FRAGMENT),
        ("python", "def f(x):\n    return x\n", SCRIPT),
        ("python", "if __name__ == '__main__':\n    pass\n", PROGRAM),
    ],
)
def test_blocks_are_classified(lang: str, source: str, kind: str) -> None:
    from snippets.build import defines_main

    assert classify(lang, source, defines_main(lang, source)).kind == kind


def test_fixture_blocks_get_modes_from_their_classification() -> None:
    snippets, problems = load_snippets(REPO)
    assert problems == []
    modes = {s.id: s.mode for s in snippets}
    assert modes["hw-bulk-copy:1"] == "run"  # defines main
    assert modes["hw-bulk-copy:2"] == "fragment"  # undeclared names, asm at file scope
    assert modes["barrier-notes:1"] == "compile"  # a complete translation unit
    assert modes["technique-pipelining:1"] == "compile"  # Python: byte-compiled
    assert modes["technique-pipelining:2"] == "fragment"  # cutlass:: without an include
    assert modes["kernel-tiled-reduction:1"] == "fragment"


def test_fragments_are_unverified_and_python_is_syntax_ok_never_pass(tmp_path: Path) -> None:
    report = verify(REPO, compile_only=True, use_cache=False, jobs=1, cache_dir=tmp_path / "cache")
    by = {(r.snippet_id, r.step): r for r in report.records}
    fragment = by[("hw-bulk-copy:2", "compile")]
    assert fragment.status == "unverified" and fragment.message == FRAGMENT_REASON
    assert by[("technique-pipelining:1", "compile")].status == SYNTAX_OK
    # pseudo-DSL: only its syntax is checked, unless the optional DSL is installed (tests/runner/test_cute_dsl.py)
    assert by[("lang-cute-dsl:2", "compile")].status in (SYNTAX_OK, "fail")
    assert by[("barrier-notes:1", "compile")].status == "pass"
    assert not any(r.status == "fail" for r in report.records if r.snippet_id != "lang-cute-dsl:2")
    assert SYNTAX_OK not in VERIFIED and LABEL[SYNTAX_OK] == "syntax ok"


def test_summaries_say_what_holds() -> None:
    assert summarize_snippet("fragment", ["sm_90a"], {}, False).text == FRAGMENT_REASON
    from runner.status import StepFact

    summary = summarize_snippet("compile", ["any"], {"any": {"compile": StepFact(SYNTAX_OK)}}, False)
    assert summary.status == SYNTAX_OK and summary.text == "syntax checked only (not run) for any"
