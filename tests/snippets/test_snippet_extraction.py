"""Extraction of a page's code blocks: ids, file lines, hidden lines, modes, targets, chaining, hashes."""

from __future__ import annotations

import json

from snippets import build_translation_unit, extract_snippets

PAGE = """\
Intro paragraph.

```cuda id=helpers
//! #include <cstdint>
__device__ int twice(int x) { return 2 * x; }
```

```bash
echo prose, not a snippet
```

- a list item

  ```cuda chain
  __global__ void k(int* p) { p[0] = twice(1); }
  ```

```cuda
int main() { return 0; }
```

```python
#! import math
print(math.pi)
```

```
no language: prose
```
"""


def extract(body: str, body_line: int = 1, archs: list[str] | None = None):  # noqa: ANN201
    return extract_snippets("pg", "dir/pg.md", body, body_line, ["sm90a", "sm100a"] if archs is None else archs)


def test_extraction_line_numbers_are_file_lines_of_the_opening_fence() -> None:
    snippets, problems = extract(PAGE, body_line=8)
    assert problems == []
    assert [s.id for s in snippets] == ["pg:1", "pg:2", "pg:3", "pg:4"]
    # body line 1 is file line 8: the fences are on body lines 3, 14, 18, 22
    assert [s.line for s in snippets] == [10, 21, 25, 29]
    assert [s.first_line for s in snippets] == [11, 22, 26, 30]
    assert [s.lang for s in snippets] == ["cuda", "cuda", "cuda", "python"]


def test_hidden_lines_are_compiled_but_not_shown() -> None:
    snippets, _ = extract(PAGE, body_line=8)
    helper, _, _, py = snippets
    assert helper.source == "__device__ int twice(int x) { return 2 * x; }\n"
    assert helper.full_source.startswith("#include <cstdint>\n")
    assert helper.hidden_lines == [11]
    assert py.source == "print(math.pi)\n" and py.full_source == "import math\nprint(math.pi)\n"


def test_hidden_marker_needs_a_space_or_nothing_after_it() -> None:
    body = "```cuda\n//!\n//!x stays visible\n//! hidden();\n```\n"
    (s,), _ = extract(body)
    assert s.source == "//!x stays visible\n"
    assert s.full_source == "\n//!x stays visible\nhidden();\n"


def test_default_mode_is_run_with_main_and_compile_without() -> None:
    snippets, _ = extract(PAGE)
    assert [s.mode for s in snippets] == ["compile", "compile", "run", "compile"]
    body = '```cuda\n// int main() in a comment\nconst char* s = "int main(";\n```\n'
    (s,), _ = extract(body)
    assert s.mode == "compile"


def test_targets_come_from_the_page_or_arch_override() -> None:
    (a, b), _ = extract("```cuda\nx;\n```\n\n```cuda arch=sm100a\ny;\n```\n")
    assert a.targets == ["sm_90a", "sm_100a"]
    assert b.targets == ["sm_100a"]
    (c,), problems = extract("```cuda\nx;\n```\n", archs=[])
    assert c.mode == "error" and "no target architecture" in (c.error or "")
    assert problems and problems[0].severity == "error"
    (d,), _ = extract("```python\nprint(1)\n```\n", archs=[])
    assert d.targets == ["any"] and d.mode == "compile"


def test_unknown_attribute_is_an_error_naming_the_line() -> None:
    body = "text\n\n```cuda runn\n__global__ void k() {}\n```\n"
    (s,), problems = extract(body, body_line=5)
    assert s.mode == "error" and not s.verifiable
    assert len(problems) == 1
    problem = problems[0]
    assert (problem.path, problem.line, problem.severity) == ("dir/pg.md", 7, "error")
    assert "unknown attribute 'runn'" in problem.message
    assert str(problem).startswith("dir/pg.md:7: error:")


def test_attribute_combinations_that_cannot_be_checked_are_errors() -> None:
    body = (
        '```cuda output="x"\n__global__ void k() {}\n```\n\n```python sass="X"\nprint(1)\n```\n\n```ptx run\n.version 8.0\n```\n'
    )
    snippets, problems = extract(body)
    assert [s.mode for s in snippets] == ["error", "error", "error"]
    assert len(problems) == 3
    (s,), problems = extract("```cuda timeout=5\n__global__ void k() {}\n```\n")
    assert s.mode == "compile" and problems[0].severity == "warning"


def test_uses_prepends_named_blocks_and_their_own_chain_in_page_order() -> None:
    body = (
        "```cuda id=a\nint a;\n```\n\n```cuda id=b uses=a\nint b;\n```\n\n"
        "```cuda\nint unrelated;\n```\n\n```cuda uses=b\nint c;\n```\n"
    )
    snippets, problems = extract(body)
    assert problems == []
    assert [p.snippet_id for p in snippets[3].chain] == ["pg:1", "pg:2"]
    assert [p.source for p in snippets[3].chain] == ["int a;\n", "int b;\n"]


def test_chain_takes_every_earlier_compiled_block_of_the_same_language() -> None:
    body = (
        '```cuda\nint a;\n```\n\n```cuda sketch\npseudo\n```\n\n```cuda compile_fail="x"\nbad\n```\n\n'
        "```cuda\nint main() { return 0; }\n```\n\n```python\nx = 1\n```\n\n```cuda chain\nint z;\n```\n"
    )
    snippets, problems = extract(body)
    assert problems == []
    assert [p.snippet_id for p in snippets[-1].chain] == ["pg:1"]


def test_uses_errors_name_the_problem() -> None:
    body = "```cuda uses=later\nx;\n```\n\n```cuda id=later\ny;\n```\n\n```python id=p\nz=1\n```\n\n```cuda uses=p\nw;\n```\n"
    snippets, problems = extract(body)
    assert snippets[0].mode == "error" and "no earlier block" in (snippets[0].error or "")
    assert snippets[3].mode == "error" and "python" in (snippets[3].error or "")
    assert [p.line for p in problems] == [1, 13]
    (a, b), problems = extract("```cuda id=x\na;\n```\n\n```cuda id=x\nb;\n```\n")
    assert b.mode == "error" and "already used" in (b.error or "")


def test_hash_changes_when_a_chained_block_changes() -> None:
    base = (
        "```cuda id=h\n__device__ int f() { return 1; }\n```\n\n```cuda uses=h\n__global__ void k(int* p) { p[0] = f(); }\n```\n"
    )
    changed = base.replace("return 1", "return 2")
    (h1, k1), _ = extract(base)
    (h2, k2), _ = extract(changed)
    assert h1.content_hash != h2.content_hash
    assert k1.source == k2.source and k1.content_hash != k2.content_hash


def test_hash_ignores_position_but_covers_attributes_and_hidden_lines() -> None:
    block = "```cuda\n__global__ void k() {}\n```\n"
    (a,), _ = extract(block)
    (b,), _ = extract("moved\n\ndown\n\n" + block)
    assert a.line != b.line and a.content_hash == b.content_hash
    (c,), _ = extract(block.replace("```cuda", '```cuda sass="X"'))
    (d,), _ = extract(block.replace("__global__", "//! #define A 1\n__global__"))
    assert len({a.content_hash, c.content_hash, d.content_hash}) == 3
    assert a.source == d.source


def test_fences_inside_longer_fences_are_not_snippets() -> None:
    body = "````markdown\n```cuda\nint x;\n```\n````\n\n> ```ptx\n> .version 8.0\n> ```\n"
    snippets, _ = extract(body)
    assert [(s.lang, s.line) for s in snippets] == [("ptx", 7)]
    assert snippets[0].full_source == ".version 8.0\n"


def test_snippets_are_json_serializable_and_round_trip() -> None:
    from snippets import Snippet

    snippets, problems = extract(PAGE)
    for s in snippets:
        data = json.loads(json.dumps(s.to_dict()))
        assert Snippet.from_dict(data) == s
    assert json.dumps([p.to_dict() for p in problems]) == "[]"


def test_translation_unit_knows_which_segment_line_each_of_its_lines_is() -> None:
    snippets, _ = extract(PAGE, body_line=8)
    tu = build_translation_unit(snippets[1])
    assert "#define __device__ __location__(device) __attribute__((used))" in tu.text
    assert '#line 1 "chain-1"' in tu.text and '#line 1 "snippet"' in tu.text
    # the hidden include of the chained block keeps the original __device__ for the header
    assert (
        '#pragma push_macro("__device__")\n#undef __device__\n#define __device__ __location__(device)\n#line 1 "chain-1"\n#include <cstdint>'
        in tu.text
    )
    lines = tu.text.split("\n")

    def tu_line(text: str) -> int:
        return next(i for i, ln in enumerate(lines, start=1) if text in ln)

    assert tu.locate(tu_line("__global__ void k")) == ("snippet", 1)
    assert tu.locate(tu_line("__device__ int twice")) == ("chain-1", 2)  # line 1 is the hidden include
    assert tu.locate(tu_line("#include <cuda_runtime.h>")) == ("prelude", 1)
    assert tu.locate(tu_line("__attribute__((used))")) is None  # generated, from no segment
    assert tu.locate(0) is None and tu.locate(len(lines) + 1) is None
