"""CUDA C++ with a 12.x toolchain: NVRTC → PTX → that release's ptxas → cubin, device code only.

The 12.x pip wheels hold ptxas and libnvvm but no nvcc (runner/toolchains.py). NVRTC of the same
release (`nvidia-cuda-nvrtc-cu12`) compiles CUDA C++ to PTX, with the device headers of
`nvidia-cuda-runtime-cu12` (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h, cooperative_groups.h). What such
a build can and cannot say:

* **Device code only.** NVRTC compiles no host code ("host functions are not allowed in JIT mode").
  Before compiling, every top-level function without `__global__`/`__device__` (main, host helpers
  and their launches, in the block, its chained blocks and the measuring harness) is blanked out,
  newlines kept so that every message still names the page's line (`device_only`). The step's
  detail names what was left out; nothing runs (a `run` block's run step is skipped with that
  reason).
* **A device-only prelude.** The documented prelude (`cuda_runtime.h`, `cuda.h`, `<cstdint>`, …)
  is served by stub headers in the build folder (`nvrtc-include/`, `STUB_HEADERS`): fixed-width
  integers, `CUtensorMap` (the driver API's 64-byte-aligned opaque struct) and empty host-only
  headers (`<vector>`, `<cstdio>`, …) whose users were blanked out. printf, malloc, memcpy and the
  math functions are NVRTC built-ins.
* **Unsupported, said per block.** libcu++/CCCL (`<cuda/…>`, `<cuda/std/…>`, `<nv/target>`), CuTe and
  CUTLASS are not in the 12.x wheel set: such a block is `skipped` with kind `NVRTC_UNSUPPORTED`
  and the header named (the matrix shows the cell as `unsupported`, with that reason); so is a
  `cpp` block (host code). A block that still fails after the host code is gone fails as any
  build does, with NVRTC's message and the page line.
* **Sandboxed.** NVRTC is a library: it is loaded by a few lines of Python (`DRIVER`, `python -I -c`)
  in the same sandbox as nvcc, never in the service process; the wheel's lib folder is bound
  read-only beside the toolchain.

A `run` block is built a second time whole-program (no `-rdc`), as nvcc builds the program that runs; its
ptxas resources and cubin (the kept SASS) are the cell's, as for a 13.x toolchain, so that registers compare
across the 12.x/13.x boundary (the relocatable build alone reported 59 registers against nvcc's 34 for one
kernel: calls to the forced helpers were not inlined). A target the release does not know (sm_103a in 12.8,
sm_110a before 13.0) is `skipped` as not buildable, with the release and target named.

The same asm-coverage rule as an nvcc build applies (runner/coverage.py): `-rdc=true` plus the
forced `__device__` of snippets/build.py, and every `asm(…)` statement of the block must be in
the PTX's inline-asm regions. NVRTC has no `-E`, so the statements are read from the unit itself
(comments removed): an asm statement inside an `#if` for another target would count as missing
(`unverified`, never a false pass); the bundled wiki has none.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path

from runner import diagnostics as dx
from runner.compile import TAMPERED, Build, _apply_regex_checks, _fail_from, tampered
from runner.coverage import unassembled_asm
from runner.outcome import StepOutcome, outcome_from_process
from runner.resources import parse_ptxas_resources
from runner.sandbox import COMPILE_LIMITS, ProcessResult, new_workdir, run_process
from runner.settings import runner_settings
from runner.toolchain import Toolchain
from snippets.build import SEGMENT_SNIPPET, TranslationUnit, build_translation_unit
from snippets.snippet import Snippet

NVRTC_RECIPE = "nvrtc-device-only-2"
"""Version of this build recipe (stubs, host-code removal, options); part of a 12.x toolchain's fingerprint."""

NVRTC_UNSUPPORTED = "not buildable with NVRTC"
"""Failure kind (`skipped`) of a block NVRTC cannot build here: host code, libcu++/CuTe/CUTLASS headers."""

DEVICE_ONLY = "NVRTC device-only build"
"""How a 12.x CUDA C++ result is labelled (toolchain label, step detail)."""

NVRTC_TIMEOUT_S = 240
"""Wall-clock limit of one NVRTC compile (the same as an nvcc compile)."""

INCLUDE_DIR = "nvrtc-include"
"""Folder of the stub headers inside the build folder."""

PTX_FILE = "keep/snippet.ptx"
CUBIN_FILE = "keep/snippet.cubin"
PROGRAM_PTX = "keep/program.ptx"
PROGRAM_CUBIN = "keep/program.cubin"

_STDINT = """\
#pragma once
// kernelwiki NVRTC device-only prelude (runner/nvrtc.py): fixed-width integers for device code
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long intptr_t;
typedef unsigned long long uintptr_t;
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::intptr_t; using ::uintptr_t; using ::size_t;
}
"""

_CUDA_H = """\
#pragma once
// kernelwiki NVRTC device-only prelude (runner/nvrtc.py): what device code uses of the driver API header
#include <cstdint>
typedef unsigned int cuuint32_t;
typedef unsigned long long cuuint64_t;
typedef struct CUtensorMap_st {
  alignas(64) cuuint64_t opaque[16];
} CUtensorMap;
"""

_EMPTY = "#pragma once\n// kernelwiki NVRTC device-only prelude (runner/nvrtc.py): host-only header, its users are not built\n"

HOST_ONLY_HEADERS = (
    "cuda_runtime.h",
    "cuda_runtime_api.h",
    "cudaTypedefs.h",
    "cstdio",
    "cstdlib",
    "cstring",
    "cmath",
    "cassert",
    "cfloat",
    "climits",
    "stdio.h",
    "stdlib.h",
    "string.h",
    "math.h",
    "assert.h",
    "vector",
    "algorithm",
    "string",
    "numeric",
    "chrono",
    "iostream",
    "memory",
    "utility",
    "functional",
    "random",
    "dlfcn.h",
    "unistd.h",
)
"""Headers served empty: the prelude's host half and the host headers the wiki's programs include."""

STUB_HEADERS: dict[str, str] = {
    **{name: _EMPTY for name in HOST_ONLY_HEADERS},
    "cstdint": _STDINT,
    "stdint.h": _STDINT,
    "cuda.h": _CUDA_H,
}
"""The device-only prelude: header name → text, written into `nvrtc-include/` of the build folder."""

_UNSUPPORTED_MISSING = re.compile(r'cannot open source file "((?:cuda|nv|cute|cutlass|cub|thrust)/[^"]+)"')
_UNSUPPORTED_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]((?:cuda|nv|cute|cutlass|cub|thrust)/[^>\"]+)[>\"]", re.M)

DRIVER = r"""
import ctypes, sys
lib_path, source, out, *options = sys.argv[1:]
lib = ctypes.CDLL(lib_path)
text = open(source, "rb").read()
prog = ctypes.c_void_p()
if lib.nvrtcCreateProgram(ctypes.byref(prog), text, source.encode(), 0, None, None) != 0:
    sys.exit("nvrtcCreateProgram failed")
for name in [o[len("--kw-name="):] for o in options if o.startswith("--kw-name=")]:
    lib.nvrtcAddNameExpression(prog, name.encode())
opts = [o.encode() for o in options if not o.startswith("--kw-name=")]
rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
size = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
log = ctypes.create_string_buffer(size.value + 1)
lib.nvrtcGetProgramLog(prog, log)
sys.stderr.write(log.value.decode("utf-8", "replace"))
if rc != 0:
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    sys.stderr.write("nvrtc: " + lib.nvrtcGetErrorString(rc).decode() + "\n")
    sys.exit(1)
lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
ptx = ctypes.create_string_buffer(size.value + 1)
lib.nvrtcGetPTX(prog, ptx)
open(out, "wb").write(ptx.value)
"""
"""The NVRTC call, run as `python -I -c DRIVER LIBNVRTC SOURCE OUT.ptx OPTIONS…` inside the sandbox
(`--kw-name=EXPR`: a name expression, `nvrtcAddNameExpression`, that instantiates a kernel template)."""

_LAUNCHED_TEMPLATE = re.compile(r"\b([A-Za-z_][\w:]*\s*<[^;{}()]*?>)\s*<<<")


def launched_templates(text: str) -> list[str]:
    """Kernel template instances that host code launches (`k<true><<<…>>>`): with the host code gone nothing would
    instantiate them, so they are given to NVRTC as name expressions."""
    return list(dict.fromkeys(re.sub(r"\s+", "", m.group(1)) for m in _LAUNCHED_TEMPLATE.finditer(text)))


_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)")|(?P<str>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")|(?P<chr>'(?:\\.|[^'\\\n])*')"""
    r"""|(?P<pp>^[ \t]*\#(?:\\\n|[^\n])*)|(?P<ident>[A-Za-z_]\w*)|(?P<punct>[{}();=<>:,\[\]])|(?P<ws>\s+)|(?P<other>.)""",
    re.S | re.M,
)
_DEVICE_WORDS = {"__global__", "__device__"}
_AGGREGATE_WORDS = {"struct", "class", "union", "enum"}


def unsupported_include(sources: list[str]) -> str | None:
    """The first libcu++ / CCCL / CuTe / CUTLASS header the sources include, or None."""
    for source in sources:
        m = _UNSUPPORTED_INCLUDE.search(source)
        if m:
            return m.group(1)
    return None


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def device_only(text: str) -> tuple[str, list[str]]:
    """`text` with its host code blanked out, newlines kept; returns the new text and the names of what went.

    Host code is, at file or namespace level and inside struct/class/union bodies: a function definition whose
    declaration has neither `__global__` nor `__device__` (`__host__ __device__` stays); a declaration that names
    the host standard library (`std::string`, `std::vector`: their headers are empty stubs here); at namespace
    level, a variable without a memory space (`__device__`, `__constant__`, …) that is not a compile-time
    constant (`constexpr`, or `const` of a non-pointer type: those device code may read)."""
    tokens = [(m.lastgroup, m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]
    out = list(text)
    removed: list[str] = []
    scopes: list[str] = []  # "namespace" / "struct" bodies entered
    head: list[str] = []
    i, head_start = 0, -1  # head: significant tokens of the declaration being read
    while i < len(tokens):
        kind, value, start, end = tokens[i]
        i += 1
        if kind in ("comment", "ws", "pp"):
            continue
        if head_start < 0:
            head_start = start
        if value == "}":
            if scopes:
                scopes.pop()
            head_start, head = -1, []
            continue
        if value == ";":
            name = _host_declaration(_without_template_parameters(head), scopes[-1] if scopes else "namespace")
            if name:
                out[head_start:end] = list(_blank(text[head_start:end]))
                removed.append(name)
            head_start, head = -1, []
            continue
        if value != "{":
            head.append(value)
            continue
        decl = _without_template_parameters(head)
        words = set(decl)
        paren = decl.index("(") if "(" in decl else -1
        entered = "namespace" in words or (decl[:1] == ["extern"] and len(decl) == 2 and decl[1].startswith('"'))
        if entered or (words & {"struct", "class", "union"} and paren < 0 and "=" not in words):
            scopes.append("namespace" if entered else "struct")
            head_start, head = -1, []  # its declarations are read the same way
            continue
        close = _matching_brace(tokens, i - 1)
        is_function = paren >= 0 and "=" not in decl[:paren] and not (set(decl[:paren]) & _AGGREGATE_WORDS)
        if is_function and not (words & _DEVICE_WORDS):
            body_end = tokens[close][3]
            out[head_start:body_end] = list(_blank(text[head_start:body_end]))
            removed.append(decl[paren - 1] if paren > 0 else "?")
        if is_function:
            head_start, head = -1, []
        else:
            head.append("{…}")  # an initializer or an enum body: the declaration ends at its `;`
        i = close + 1
    return "".join(out), removed


_MEMORY_SPACES = {"__device__", "__constant__", "__shared__", "__managed__", "__global__"}
_NOT_VARIABLES = {"typedef", "using", "static_assert", "namespace", "friend", "template", "struct", "class", "union", "enum"}
_STD_PROVIDED = {"int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "intptr_t"}
_STD_PROVIDED |= {"uintptr_t", "size_t"}


def _host_declaration(decl: list[str], scope: str) -> str | None:
    """The name a declaration (ended by `;`) declares when it is host code (see device_only), else None."""
    if not decl or decl[0] in _NOT_VARIABLES or set(decl) & _MEMORY_SPACES:
        return None
    eq = decl.index("=") if "=" in decl else len(decl)
    idents = [t for t in decl[:eq] if re.fullmatch(r"[A-Za-z_]\w*", t)]
    name = idents[-1] if idents else "?"
    uses_std = any(
        decl[j] == "std" and decl[j + 1 : j + 3] == [":", ":"] and decl[j + 3] not in _STD_PROVIDED for j in range(len(decl) - 3)
    )
    if uses_std:
        return name
    if scope != "namespace" or ("(" in decl[:eq]) or decl[0] == "extern":
        return None  # a member, a function's declaration
    constant = "constexpr" in decl or ("const" in decl[:eq] and "*" not in decl[:eq] and "&" not in decl[:eq])
    return None if constant else name


def _without_template_parameters(head: list[str]) -> list[str]:
    """A declaration's tokens without its `template <…>` parameter lists (`class T` there is no struct)."""
    out: list[str] = []
    i = 0
    while i < len(head):
        if head[i] == "template" and i + 1 < len(head) and head[i + 1] == "<":
            depth, i = 0, i + 1
            while i < len(head):
                depth += {"<": 1, ">": -1}.get(head[i], 0)
                i += 1
                if depth == 0:
                    break
            continue
        out.append(head[i])
        i += 1
    return out


def _matching_brace(tokens: list[tuple[str | None, str, int, int]], i: int) -> int:
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j][1] == "{":
            depth += 1
        elif tokens[j][1] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


def coverage_source(text: str) -> str:
    """The unit as runner/coverage.py reads a preprocessed source: `#line N "seg"` as `# N "seg"`, comments gone."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: _blank(m.group()), text, flags=re.S)
    return re.sub(r'^#line (\d+) "', r'# \1 "', text, flags=re.M)


def nvrtc_options(target: str, include_dirs: list[str], snippet: Snippet, names: tuple[str, ...] | list[str] = ()) -> list[str]:
    """NVRTC's options for `target`: relocatable (every forced `__device__` function is emitted), line info,
    the stub headers first, then the wheel's device headers; the block's -D/-U/-std flags."""
    number = target.removeprefix("sm_")
    own = [f for f in snippet.flags if f.startswith(("-D", "-U", "-std=", "--std="))]
    return [
        f"--gpu-architecture=compute_{number}",
        "--relocatable-device-code=true",
        "-lineinfo",
        "--std=c++17",
        "--diag-suppress=177",
        f"-I{INCLUDE_DIR}",
        *(f"-I{d}" for d in include_dirs),
        "-I.",
        *own,
        *(f"--kw-name={n}" for n in names),
    ]


def _step(
    argv: list[str], workdir: Path, tu: TranslationUnit, isolation: str | None, binds: list[str], collect: tuple[str, ...]
) -> ProcessResult:
    settings = runner_settings()
    settings = replace(settings, extra_binds=(*settings.extra_binds, *binds))
    return run_process(
        argv,
        workdir,
        NVRTC_TIMEOUT_S,
        limits=COMPILE_LIMITS,
        isolation=isolation,
        settings=settings,
        collect=(tu.filename, *collect),
        protect=(tu.filename, *tu.companions),
    )


def skipped(detail: str) -> StepOutcome:
    return StepOutcome(step="compile", status="skipped", kind=NVRTC_UNSUPPORTED, detail=detail)


def device_unit(tu: TranslationUnit) -> tuple[TranslationUnit, list[str]]:
    """The unit NVRTC compiles: host code blanked out of it and of its companion files (the measuring harness).

    NVRTC ignores `#pragma push_macro`/`pop_macro` ("unrecognized #pragma"), with which snippets/build.py gives an
    included header the plain `__device__`: the forced definition is restored after each include by hand."""
    lines: list[str] = []
    origin: list[tuple[str, int]] = []
    for line, where in zip(tu.text.split("\n"), [*tu.tu_lines, ("", 0)], strict=False):
        if line == _PUSH:
            line = ""
        elif line == _POP:
            lines.append("#undef __device__")
            origin.append(("", 0))
            line = _FORCED
        lines.append(line)
        origin.append(where)
    text, removed = device_only("\n".join(lines))
    companions: dict[str, str] = {}
    for name, source in tu.companions.items():
        companions[name], gone = device_only(source)
        if gone:
            removed.append(f"the host code of {name}")
    return TranslationUnit(text=text, filename=tu.filename, tu_lines=origin[: len(origin) - 1], companions=companions), removed


_PUSH = '#pragma push_macro("__device__")'
_POP = '#pragma pop_macro("__device__")'
_FORCED = "#define __device__ __location__(device) __attribute__((used))"


def build_nvrtc(
    snippet: Snippet, target: str, toolchain: Toolchain, *, want_program: bool, isolation: str | None = None
) -> Build:
    """Compile a cuda block's device code for `target` with NVRTC and the toolchain's ptxas (see the module text)."""
    workdir = new_workdir("kw-nvrtc-")
    full = build_translation_unit(snippet)
    build = Build(outcome=StepOutcome(step="compile", status="error"), workdir=workdir, tu=full)
    if snippet.lang != "cuda":
        build.outcome = skipped(f"{snippet.lang} blocks are host code: an {DEVICE_ONLY} builds device code only")
        return build
    header = unsupported_include([part.source for part in snippet.chain] + [snippet.full_source])
    if header:
        build.outcome = skipped(
            f"includes <{header}>: libcu++/CCCL, CuTe and CUTLASS headers are not part of the CUDA {toolchain.nvcc_release} "
            f"wheels, so an {DEVICE_ONLY} cannot compile it"
        )
        return build
    if not toolchain.nvrtc or not toolchain.ptxas:
        build.outcome.detail = "NVRTC or ptxas not found: " + "; ".join(toolchain.notes)
        return build
    tu, removed = device_unit(full)
    build.tu = tu
    tu.write(workdir)
    (workdir / "keep").mkdir()
    (workdir / INCLUDE_DIR).mkdir()
    for name, text in STUB_HEADERS.items():
        (workdir / INCLUDE_DIR / name).write_text(text, encoding="utf-8")
    lib = Path(toolchain.nvrtc)
    binds = [str(lib.parent), *toolchain.nvrtc_include]
    options = nvrtc_options(target, list(toolchain.nvrtc_include), snippet, launched_templates(full.text))
    argv = [toolchain.python, "-I", "-c", DRIVER, str(lib), tu.filename, PTX_FILE, *options]
    res = _step(argv, workdir, tu, isolation, binds, (PTX_FILE,))
    command = f"nvrtc({shlex.join([tu.filename, *options])})"
    outcome = outcome_from_process(res)
    outcome.command = command
    build.outcome = outcome
    ptx = res.artifacts.get(PTX_FILE)
    build.ptx = ptx.decode("utf-8", "replace") if ptx is not None else None
    if res.exit_code not in (0, None) and "invalid value for --gpu-architecture" in res.output:
        build.outcome = skipped(f"CUDA {toolchain.nvcc_release} does not know {target}: its NVRTC refuses compute_{target[3:]}")
        build.outcome.command, build.outcome.output = command, outcome.output
        return build
    missing_header = _UNSUPPORTED_MISSING.search(res.output) if res.exit_code not in (0, None) else None
    if missing_header and snippet.mode != "compile_fail":
        build.outcome = skipped(
            f"a header it includes needs <{missing_header.group(1)}> (libcu++/CCCL), which is not part of the CUDA "
            f"{toolchain.nvcc_release} wheels: an {DEVICE_ONLY} cannot compile it"
        )
        build.outcome.command, build.outcome.output = command, outcome.output
        return build
    if not _finished(outcome, res, tu, snippet, "NVRTC"):
        return build
    if build.ptx is None:
        outcome.status, outcome.detail = "error", "NVRTC reported success but wrote no PTX"
        return build
    ptxas = [toolchain.ptxas, f"-arch={target}", "-v", "-c", "-lineinfo", "-o", CUBIN_FILE, PTX_FILE]
    res = _step(ptxas, workdir, tu, isolation, [], (CUBIN_FILE,))
    outcome.command = f"{command} && {shlex.join(res.argv)}"
    outcome.exit_code, outcome.duration_s = res.exit_code, round(outcome.duration_s + res.duration_s, 3)
    outcome.output = (outcome.output + "\n" + res.output).strip()
    outcome.resources = parse_ptxas_resources(res.output)
    outcome.warnings = dx.meaning_warnings(res.output, dx.RDC_BUILD)
    if not _finished(outcome, res, tu, snippet, "ptxas") or not _cubin_read_back(outcome, res, CUBIN_FILE):
        return build
    if snippet.mode == "compile_fail":
        outcome.status = "fail"
        outcome.detail = f"compiled cleanly ({DEVICE_ONLY}), but compile_fail expects an error containing '{snippet.expect}'"
        return build
    missing = unassembled_asm(coverage_source(tu.text), build.ptx, SEGMENT_SNIPPET)
    if missing:
        names = ", ".join(sorted({m for s in missing for m in s.mnemonics}))[:200]
        outcome.status, outcome.kind = "unverified", dx.NOT_ASSEMBLED
        outcome.segment, outcome.segment_line = SEGMENT_SNIPPET, missing[0].line
        outcome.detail = f"{len(missing)} inline asm statement(s) never reached ptxas for {target} ({names})"
        return build
    _apply_regex_checks(outcome, snippet, "ptx", build.ptx)
    build.device_binary = workdir / CUBIN_FILE
    if snippet.mode == "run" and outcome.status == "pass":
        _whole_program(build, snippet, target, toolchain, isolation, lib, binds, options)
    host = f"; host code not built: {', '.join(removed)}" if removed else ""
    if outcome.status == "pass":
        outcome.detail = f"{DEVICE_ONLY} (CUDA {toolchain.nvcc_release}): device code only{host}"
    if want_program:
        build.no_program = f"not run: an {DEVICE_ONLY} has no host program"
    return build


def _whole_program(
    build: Build,
    snippet: Snippet,
    target: str,
    toolchain: Toolchain,
    isolation: str | None,
    lib: Path,
    binds: list[str],
    options: list[str],
) -> None:
    """A `run` block's device code built again whole-program (no -rdc), as nvcc builds the program that runs: its
    ptxas resources and its cubin (the kept SASS) replace the relocatable build's, so that a 12.x cell compares
    with a 13.x one (whose run blocks report the whole-program build, runner/compile.py)."""
    assert toolchain.ptxas is not None
    whole = [o for o in options if o != "--relocatable-device-code=true"]
    argv = [toolchain.python, "-I", "-c", DRIVER, str(lib), build.tu.filename, PROGRAM_PTX, *whole]
    outcome = build.outcome
    res = _step(argv, build.workdir, build.tu, isolation, binds, (PROGRAM_PTX,))
    outcome.command += f" && nvrtc({shlex.join([build.tu.filename, *whole])})"
    if not _finished(outcome, res, build.tu, snippet, "NVRTC (whole-program build)"):
        return
    res = _step(
        [toolchain.ptxas, f"-arch={target}", "-v", "-lineinfo", "-o", PROGRAM_CUBIN, PROGRAM_PTX],
        build.workdir,
        build.tu,
        isolation,
        [],
        (PROGRAM_CUBIN,),
    )
    outcome.command += f" && {shlex.join(res.argv)}"
    outcome.output = (outcome.output + "\n" + res.output).strip()
    if not _finished(outcome, res, build.tu, snippet, "ptxas (whole-program build)") or not _cubin_read_back(
        outcome, res, PROGRAM_CUBIN
    ):
        return
    resources = parse_ptxas_resources(res.output)
    if resources:
        outcome.resources = resources
    outcome.warnings += dx.meaning_warnings(res.output, dx.PROGRAM_BUILD)
    build.device_binary = build.workdir / PROGRAM_CUBIN


def _finished(outcome: StepOutcome, res: ProcessResult, tu: TranslationUnit, snippet: Snippet, tool: str) -> bool:
    """Mark `outcome` for a step that did not end cleanly; True when it did."""
    changed = tampered(res, tu)
    if changed:
        outcome.status, outcome.kind, outcome.detail = "fail", TAMPERED, changed
    elif res.error:
        outcome.status, outcome.detail = "error", f"could not run {tool}: {res.error}"
    elif res.timed_out:
        outcome.status, outcome.kind = "timeout", dx.TIMEOUT
        outcome.detail = f"{tool} did not finish within {NVRTC_TIMEOUT_S} s (killed with its process group)"
    elif res.exit_code != 0:
        diag = dx.diagnose_build(res.output, "cuda", tu, None)
        _fail_from(outcome, snippet, diag, res.output)
    else:
        return True
    return False


def _cubin_read_back(outcome: StepOutcome, res: ProcessResult, name: str) -> bool:
    """True when ptxas's cubin was handed back as a regular file of the sandbox user (the readback rule); else the step
    is an error. Its SASS is only ever read inside the sandbox, but a pass must name a cubin that is there: code
    running where ptxas runs could leave a symlink to a host file in its place."""
    if name in res.artifacts:
        return True
    why = res.refused.get(name, "not written")
    outcome.status, outcome.detail = "error", f"ptxas reported success but its cubin {name} could not be read back ({why})"
    return False
