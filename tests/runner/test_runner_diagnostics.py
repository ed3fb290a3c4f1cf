"""Classifying compiler output and finding the inline asm that never reached ptxas (recorded outputs)."""

from __future__ import annotations

from runner import diagnostics as dx
from runner.coverage import asm_statements, mnemonics, regex_checks, unassembled_asm
from runner.resources import parse_ptxas_resources

PTXAS_UNSUPPORTED = """\
ptxas keep/snippet.ptx, line 29; error   : Feature '.cta_group::1' not supported on .target 'sm_90a'
ptxas keep/snippet.ptx, line 29; error   : Instruction 'tcgen05.alloc' not supported on .target 'sm_90a'
ptxas fatal   : Ptx assembly aborted due to errors
"""

PTX = """\
.visible .entry _Z1kPj(
)
{
\t.loc\t2 5 0
\tmov.u32 %r1, 0;
\t.loc\t2 6 3
\t// begin inline asm
\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;
\t// end inline asm
\tret;
}
\t.file\t1 "/tmp/kw-build-x/prelude"
\t.file\t2 "/tmp/kw-build-x/snippet"
"""


def test_unsupported_instruction_is_classified_and_mapped_through_loc() -> None:
    d = dx.diagnose_build(PTXAS_UNSUPPORTED, "cuda", None, PTX)
    assert d.kind == dx.UNSUPPORTED_ON_TARGET
    assert "tcgen05.alloc" in d.message
    assert dx.ptx_loc(PTX, 8) == ("snippet", 6)


def test_frontend_gcc_link_and_python_errors() -> None:
    d = dx.diagnose_build('snippet(3): error: identifier "twice" is undefined\n  x\n', "cuda")
    assert (d.kind, d.segment, d.segment_line) == (dx.UNDEFINED_IDENTIFIER, "snippet", 3)
    d = dx.diagnose_build('chain-1(7): catastrophic error: cannot open source file "cute/tensor.hpp"\n', "cuda")
    assert (d.kind, d.segment, d.segment_line) == (dx.MISSING_HEADER, "chain-1", 7)
    d = dx.diagnose_build("snippet:4:12: error: invalid conversion from 'const char*' to 'int'\n", "cpp")
    assert (d.kind, d.segment_line) == (dx.HOST_COMPILE_ERROR, 4)
    d = dx.diagnose_build(
        "/usr/bin/ld: x.o: in function `main':\nx.cpp:(.text+0x5): undefined reference to `nothere()'\ncollect2: error: ld returned 1 exit status\n",
        "cuda",
    )
    assert d.kind == dx.LINK_ERROR and "nothere" in d.message
    d = dx.diagnose_build("nvlink error   : Undefined reference to '_Z3foov' in 'snippet.o'\n", "cuda")
    assert d.kind == dx.LINK_ERROR
    d = dx.diagnose_build('  File "snippet.py", line 2\n    def f(:\n          ^\nSyntaxError: invalid syntax\n', "python")
    assert d.kind == dx.PYTHON_SYNTAX_ERROR and d.message == "SyntaxError: invalid syntax"


def test_a_segment_line_maps_back_to_its_page_line() -> None:
    """`snippet` is the block itself (first source line 22), `chain-K` its K-th chained block (first lines 11, 15)."""
    assert dx.page_line(22, [11, 15], "snippet", 1) == 22
    assert dx.page_line(22, [11, 15], "chain-2", 3) == 17
    assert dx.page_line(22, [11, 15], "snippet", 40, {"snippet": 3}) == 24  # past the block's end: its last line
    assert dx.page_line(22, [11, 15], "prelude", 1) is None
    assert dx.page_line(22, [11, 15], "chain-3", 1) is None
    assert dx.page_line(22, [], None, None) is None


def test_first_error_wins_across_tools() -> None:
    out = 'snippet(9): error: expected a ";"\nsnippet(2): error: identifier "x" is undefined\n'
    d = dx.diagnose_build(out, "cuda")
    assert d.segment_line == 9 and d.kind == dx.DEVICE_COMPILE_ERROR


PREPROCESSED = """\
# 1 "prelude"
int prelude_stuff;
# 1 "snippet"
template <int N> __attribute__((device)) void f(int* p) {
  asm volatile("{\\n\\t.reg .pred p;\\n\\t"
               "setp.eq.u32 p, %0, 1;\\n\\t"
               "@p bogus.tmpl.b32 [%0];\\n\\t}" :: "r"(N));
}
__attribute__((device)) void g(int* p) { asm("add.s32 %0, %0, 1;" : "+r"(*p)); asm volatile("" ::: "memory"); }
# 20 "snippet"
__attribute__((device)) void h() { __asm__ __volatile__("LAB_%=: bar.sync 0;"); }
"""


def test_asm_statements_are_found_with_their_lines_and_mnemonics() -> None:
    stmts = asm_statements(PREPROCESSED, "snippet")
    assert [(s.line, s.mnemonics) for s in stmts] == [
        (2, ["setp.eq.u32", "bogus.tmpl.b32"]),
        (6, ["add.s32"]),
        (6, []),
        (20, ["bar.sync"]),
    ]
    ptx = "// begin inline asm\nadd.s32 %r1, %r1, 1;\n// end inline asm\n// begin inline asm\nLAB_1: bar.sync 0;\n// end inline asm\n"
    missing = unassembled_asm(PREPROCESSED, ptx, "snippet")
    assert [m.line for m in missing] == [2]


def test_mnemonics_skip_directives_labels_guards_and_braces() -> None:
    text = "{\n.reg .b32 r;\nWAIT:\n@!p mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@p bra WAIT;\n}"
    assert mnemonics(text) == ["mbarrier.try_wait.parity.shared::cta.b64", "bra"]


def test_regex_checks() -> None:
    results = regex_checks({"sass": ["UTMALDG"], "no_sass": ["LDL"]}, "sass", "UTMALDG.2D [UR8], [UR4] ;\nSTL [R1], R2 ;")
    assert [r["ok"] for r in results] == [True, True]
    results = regex_checks({"sass": ["HGMMA"], "no_sass": ["STL"]}, "sass", "STL [R1], R2 ;")
    assert [r["ok"] for r in results] == [False, False]


def test_ptxas_resource_report_is_parsed() -> None:
    text = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1kPi' for 'sm_90a'
ptxas info    : Function properties for _Z1kPi
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 368 bytes cmem[0]
ptxas info    : Function properties for _Z6helperi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""
    res = parse_ptxas_resources(text)
    assert res["registers"] == 40 and res["smem_bytes"] == 4096 and res["barriers"] == 1
    assert res["spill_store_bytes"] == 8 and res["spill_load_bytes"] == 4 and res["stack_frame_bytes"] == 16
    assert [f["name"] for f in res["functions"]] == ["_Z1kPi", "_Z6helperi"]
    assert res["functions"][0]["cmem_bytes"] == {"cmem0": 368}
    assert parse_ptxas_resources("nothing") == {}
