"""The one order of statuses and the rule for what a snippet's evidence proves (runner/status.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from runner.diagnostics import RDC_BUILD, meaning_warnings, record_warnings
from runner.status import (
    PARTIAL,
    WORST_FIRST,
    StepFact,
    needed_steps,
    rank,
    summarize_snippet,
    target_status,
    worst,
)
from runner.verify import combined_status

REPO = Path(__file__).resolve().parents[2]
RAN = {"compile": StepFact("pass"), "run": StepFact("pass")}
NO_SM100 = {"compile": StepFact("pass"), "run": StepFact("skipped", "not run: no sm_100 device here")}

C7504 = (
    "ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain compatibility across compilation units.\n"
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : (C7519) warpgroup.arrive is injected in around line 36 by compiler to allow use of registers in GMMA\n"
    "ptxas info    : Used 165 registers, used 2 barriers, 1024 bytes smem\n"
)


def test_failures_come_first_then_what_is_unproven_then_passes() -> None:
    assert worst(["pass", "skipped"]) == "skipped"
    assert worst(["pass", "xfail"]) == "xfail"
    assert worst(["skipped", "unverified", "stale"]) == "stale"
    assert worst(["pass", "fail", "timeout", "error"]) == "error"
    assert worst([]) == "unknown"
    assert rank("partial") < rank("xfail") < rank("pass")
    assert rank("no such status") == len(WORST_FIRST)
    assert combined_status(["pass", "skipped"]) == "skipped"  # the runner uses the same order


def test_statuses_and_their_order_are_defined_only_in_runner_status() -> None:
    """No other module spells out an order of statuses (the four copies issue 15 found): a list naming failures,
    passes and a derived status (stale/unknown) is an order; a plain set of record statuses for validation is not."""
    offenders = []
    for path in [*(REPO / "app").rglob("*.py"), *(REPO / "runner").rglob("*.py")]:
        if path.name == "status.py" and path.parent.name == "runner":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.List, ast.Tuple)):
                words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if {"error", "timeout", "fail", "pass"} <= set(words) and ("stale" in words or "unknown" in words):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


def test_a_run_block_needs_a_passing_run_and_its_declared_sass_checks() -> None:
    assert needed_steps("run", False) == ("compile", "run")
    assert needed_steps("run", True) == ("compile", "sass", "run")
    assert needed_steps("compile", True) == ("compile", "sass")
    assert needed_steps("compile_fail", True) == ("compile",)
    assert target_status({"compile": "pass"}, needed_steps("run", False)) == "unknown"
    assert target_status({"compile": "pass", "run": "pass"}, needed_steps("run", True)) == "unknown"
    assert target_status({"compile": "pass", "run": "skipped"}, needed_steps("run", False)) == "skipped"
    # a failure on a step the mode does not need still counts: it is a real failure
    assert target_status({"compile": "xfail", "sass": "fail"}, needed_steps("compile_fail", False)) == "fail"


def test_a_program_that_never_ran_on_a_declared_target_is_not_a_pass() -> None:
    s = summarize_snippet("run", ["sm_90a", "sm_100a"], {"sm_90a": RAN, "sm_100a": NO_SM100}, False)
    assert s.status == PARTIAL
    assert s.text == "ran on sm_90a · compiled for sm_100a, no SM100 GPU"
    assert s.targets == {"sm_90a": "pass", "sm_100a": "skipped"}


def test_only_declared_targets_count() -> None:
    evidence = {"sm_90a": RAN, "sm_100a": NO_SM100}
    assert summarize_snippet("run", ["sm_90a"], evidence, False).status == "pass"
    missing = summarize_snippet("run", ["sm_90a", "sm_103a"], evidence, False)
    assert (missing.status, missing.text) == (PARTIAL, "ran on sm_90a · not yet verified on sm_103a")


def test_targets_that_could_not_run_anywhere_say_why() -> None:
    s = summarize_snippet(
        "run",
        ["sm_89", "sm_100a"],
        {
            "sm_89": {"compile": StepFact("pass"), "run": StepFact("skipped", "not run: no sm_89 device here")},
            "sm_100a": NO_SM100,
        },
        False,
    )
    assert (s.status, s.text) == ("skipped", "compiled for sm_89, sm_100a, no SM89 or SM100 GPU")


def test_failures_and_stale_records_win_over_passes_elsewhere() -> None:
    failed = summarize_snippet(
        "run",
        ["sm_90a", "sm_100a"],
        {"sm_90a": {"compile": StepFact("pass"), "run": StepFact("fail", "3 mismatches")}, "sm_100a": NO_SM100},
        False,
    )
    assert failed.status == "fail" and "run failed on sm_90a" in failed.text
    stale = summarize_snippet(
        "compile",
        ["sm_90a", "sm_100a"],
        {"sm_90a": {"compile": StepFact("stale")}, "sm_100a": {"compile": StepFact("pass")}},
        False,
    )
    assert stale.status == "stale"


def test_compile_blocks_and_expected_failures() -> None:
    both = {"sm_90a": {"compile": StepFact("pass")}, "sm_100a": {"compile": StepFact("pass")}}
    assert summarize_snippet("compile", ["sm_90a", "sm_100a"], both, False).text == "compiled for sm_90a, sm_100a"
    assert summarize_snippet("compile", ["sm_90a"], both, True).status == "unknown"  # declared SASS checks never ran
    xfail = summarize_snippet("compile_fail", ["sm_90a"], {"sm_90a": {"compile": StepFact("xfail")}}, False)
    assert xfail.status == "xfail"
    assert summarize_snippet("sketch", ["sm_90a"], {}, False).status == "unverified"


def test_ptxas_warnings_that_an_instruction_was_ignored_are_kept() -> None:
    assert meaning_warnings(C7504) == [
        "ptxas (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain compatibility across compilation units."
    ]
    assert meaning_warnings(
        "ptxas warning : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized", "b"
    ) == ["ptxas (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized [b]"]
    assert meaning_warnings("ptxas info    : Used 32 registers\n") == []
    assert record_warnings("compile", "cuda", C7504)[0].endswith(f"[{RDC_BUILD}]")
    assert record_warnings("run", "cuda", C7504) == []


def test_every_status_has_a_label_in_the_one_order() -> None:
    from runner.status import LABEL

    assert tuple(LABEL) == WORST_FIRST  # templates list statuses by iterating the labels
