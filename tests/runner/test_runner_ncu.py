"""ncu= assertions: the closed vocabulary, ncu's CSV read strictly, the sum over launches, the step never a pass
without a GPU or ncu, and the service accepting the new step."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from app.evidence.ingest import parse_record
from runner.compile import Build
from runner.gpus import Gpu
from runner.ncu import MAX_CSV_BYTES, NcuCsvError, evaluate, find_ncu, ncu_argv, ncu_step, parse_ncu_csv
from runner.outcome import StepOutcome
from runner.toolchain import Toolchain
from runner.verify import verify
from snippets.attributes import MAX_NCU_ASSERTIONS, InfoStringError, check_snippet_rules, parse_attributes
from snippets.snippet import Snippet

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
LD = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
ST = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
GPU = Gpu(0, "NVIDIA H200", "9.0", "580.159.04")  # named only: the stand-in ncu below never touches a GPU


def test_ncu_assertions_are_parsed_and_normalised() -> None:
    attrs = parse_attributes(f'run ncu-kernel=transpose_swizzled ncu="{LD} == 0;{ST}<=0.5 ; x.sum>3"')
    assert attrs.ncu == [f"{LD} == 0", f"{ST} <= 0.5", "x.sum > 3"]
    assert attrs.ncu_kernel == "transpose_swizzled"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (f"{LD} = 0", "not METRIC OP VALUE"),
        (f"{LD} == 0x10", "not METRIC OP VALUE"),
        (f"{LD} != 0", "not METRIC OP VALUE"),
        ("L1tex.sum == 0", "not METRIC OP VALUE"),
        ("a.sum == 0; $(reboot).sum == 1", "not METRIC OP VALUE"),
        ("a.sum == -1", "not METRIC OP VALUE"),
        (f"{LD} == 0;", "separated by"),
        ("; ".join(["a.sum == 0"] * (MAX_NCU_ASSERTIONS + 1)), f"at most {MAX_NCU_ASSERTIONS}"),
    ],
)
def test_malformed_ncu_assertions_are_refused_naming_the_attribute(value: str, why: str) -> None:
    with pytest.raises(InfoStringError) as info:
        parse_attributes(f'run ncu="{value}"')
    assert "ncu=" in str(info.value) and why in str(info.value)


@pytest.mark.parametrize("name", ["smem.*", "a b", "k;rm", "k|j", "x" * 129, ""])
def test_kernel_names_outside_the_vocabulary_are_refused(name: str) -> None:
    with pytest.raises(InfoStringError) as info:
        parse_attributes(f'run ncu="a.sum == 0" ncu-kernel="{name}"')
    assert "ncu-kernel" in str(info.value)


def test_the_runner_applies_the_same_rule_to_a_snippet_from_elsewhere() -> None:
    check_snippet_rules([], {"ncu": [f"{LD} == 0"], "ncu_kernel": ["transpose_swizzled"]})
    for bad in ({"ncu": ["a.sum == 0 --export /tmp/x"]}, {"ncu": ["a.sum  ==  0"]}, {"ncu_kernel": ["a.*"]}, {"ncu": []}):
        with pytest.raises(InfoStringError):
            check_snippet_rules([], bad)


def test_lint_names_the_attribute_and_the_mode(make_wiki, page_text, toolchain: Toolchain, shared_cache: Path) -> None:  # noqa: ANN001
    body = '```cuda compile ncu="a.sum == 0"\n__global__ void k() {}\n```\n\n```cuda run ncu="a.sum = 0"\nint main() {}\n```\n'
    wiki = make_wiki({"p.md": page_text("t-ncu-lint", body)})
    report = verify(wiki, cache_dir=shared_cache, toolchain=toolchain, gpus=[], compile_only=True)
    messages = [str(p) for p in report.problems]
    assert any("p.md:8" in m and "ncu=/ncu-kernel= need a block that runs" in m for m in messages), messages
    assert any("p.md:12" in m and "ncu=: 'a.sum = 0' is not METRIC OP VALUE" in m for m in messages), messages


def test_the_argv_is_a_list_built_from_checked_words() -> None:
    argv = ncu_argv("/opt/ncu", [LD, ST], "transpose_swizzled", ["./snippet"])
    assert argv == [
        "/opt/ncu",
        "--csv",
        "--print-units",
        "base",
        "--clock-control",
        "none",
        "--metrics",
        f"{LD},{ST}",
        "-k",
        "regex:transpose_swizzled",
        "./snippet",
    ]


def test_a_recorded_csv_is_parsed_and_its_assertions_evaluated() -> None:
    reading = parse_ncu_csv((FIXTURES / "transpose.csv").read_text())
    assert [(r.launch, r.metric, r.value) for r in reading.rows][2] == (
        "0",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
        262144.0,
    )
    assert reading.messages[0].startswith("==PROF== Connected")
    checks = evaluate(
        [f"{LD} == 0", f"{ST} == 0", f"{LD} > 0", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum >= 262144"], reading
    )
    assert [c["ok"] for c in checks] == [True, True, False, True]
    assert checks[0]["detail"] == f"{LD} = 0 (sum over 1 launch(es) of 1 profiled)"


def test_values_are_summed_over_every_profiled_launch() -> None:
    reading = parse_ncu_csv((FIXTURES / "smem_read.csv").read_text())
    (check,) = evaluate([f"{LD} > 1000000000"], reading)
    assert check["ok"] and check["detail"] == f"{LD} = 4290772992 (sum over 2 launch(es) of 2 profiled)"
    (missing,) = evaluate(["sm__cycles_elapsed.max < 5"], reading)
    assert not missing["ok"] and "not reported by ncu" in str(missing["detail"])


def test_malformed_or_oversized_csv_is_refused() -> None:
    header = (FIXTURES / "transpose.csv").read_text().splitlines()[7]
    cases = {
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n": "no CSV header",
        '"ID","Metric Name"\n"0","x"\n': "header lacks",
        header + '\n"0","1"\n': "has 2 fields",
        header.replace('"Metric Value"', '"Metric Value"') + "\n" + ",".join(['"0"'] * 14) + ',"n/a"\n': "is not a number",
        "x" * (MAX_CSV_BYTES + 1): "larger than",
    }
    for text, why in cases.items():
        with pytest.raises(NcuCsvError) as info:
            parse_ncu_csv(text)
        assert why in str(info.value)


def test_ncu_is_found_through_the_setting_first(tmp_path: Path) -> None:
    tool = tmp_path / "ncu"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert find_ncu({"KERNELWIKI_NCU": str(tool)}) == str(tool)
    tool.chmod(0o644)
    assert find_ncu({"KERNELWIKI_NCU": str(tool)}) != str(tool)


def test_the_toolkit_launcher_is_resolved_to_the_nsight_compute_install_it_would_run(tmp_path: Path) -> None:
    # the CUDA toolkit's bin/ncu is a script that finds <toolkit>/nsight-compute-*/ncu at run time; the
    # sandbox binds only the folders of the command's own program, so the runner runs the install's ncu
    cuda = tmp_path / "cuda-13.0"
    (cuda / "bin").mkdir(parents=True)
    launcher = cuda / "bin" / "ncu"
    launcher.write_text('#!/bin/sh\nexec "$(dirname "$0")/../nsight-compute-*/ncu" "$@"\n')
    launcher.chmod(0o755)
    assert find_ncu({"KERNELWIKI_NCU": str(launcher)}) == str(launcher)  # no install beside it: the launcher itself
    for version in ("2025.2.0", "2025.3.1"):
        real = cuda / f"nsight-compute-{version}" / "ncu"
        real.parent.mkdir()
        real.write_text("#!/bin/sh\n")
        real.chmod(0o755)
    assert find_ncu({"KERNELWIKI_NCU": str(launcher)}) == str(cuda / "nsight-compute-2025.3.1" / "ncu")


def test_without_a_gpu_the_ncu_step_is_skipped_never_passed(
    make_wiki, page_text, toolchain: Toolchain, shared_cache: Path
) -> None:  # noqa: ANN001
    body = f'```cuda run ncu-kernel=k ncu="{LD} == 0"\n__global__ void k() {{}}\nint main() {{ k<<<1, 1>>>(); return 0; }}\n```\n'
    wiki = make_wiki({"p.md": page_text("t-ncu-skip", body)})
    report = verify(wiki, cache_dir=shared_cache, toolchain=toolchain, gpus=[])
    steps = {r.step: r for r in report.records}
    assert steps["compile"].status == "pass" and steps["run"].status == "skipped"
    assert steps["ncu"].status == "skipped" and steps["ncu"].message == "not profiled: no GPU of this architecture here"
    record, error = parse_record(steps["ncu"].to_dict())
    assert error is None and record is not None and record.to_record()["step"] == "ncu"


def _fake_build_and_snippet(tmp_path: Path, ncu_line: str) -> tuple[Build, Snippet]:
    from snippets.extract import extract_snippets

    (found,), problems = extract_snippets("t-ncu", "p.md", f"```cuda run {ncu_line}\nint main() {{}}\n```\n", 1, ["sm90"])
    assert not problems
    outcome = StepOutcome(step="compile", status="pass")
    build = Build(outcome, tmp_path, cast(Any, None), ["snippet"], {"snippet": b"#!/bin/sh\necho program output\n"})
    return build, found


def _fake_ncu(tmp_path: Path, text: str) -> str:
    """A stand-in for ncu (the real one needs a GPU): it runs the program as ncu would, insists on
    KERNELWIKI_PROFILE=1, then prints `text` on stdout, all inside the sandbox."""
    folder = tmp_path / "fake-ncu"
    folder.mkdir()
    (folder / "out.txt").write_text(text)
    tool = folder / "ncu"
    tool.write_text(
        f'#!/bin/sh\nfor last; do :; done\n"$last" || exit 3\n[ "$KERNELWIKI_PROFILE" = 1 ] || exit 4\ncat {folder}/out.txt\n'
    )
    tool.chmod(0o755)
    return str(tool)


def test_the_step_reads_ncus_csv_from_the_sandboxed_commands_stdout(tmp_path: Path, toolchain: Toolchain) -> None:
    build, snippet = _fake_build_and_snippet(tmp_path, f'ncu-kernel=transpose_swizzled ncu="{LD} == 0; {ST} > 0"')
    ncu = _fake_ncu(tmp_path, (FIXTURES / "transpose.csv").read_text())
    outcome = ncu_step(build, snippet, GPU, toolchain, ncu=ncu)
    assert outcome.step == "ncu" and outcome.status == "fail", outcome.detail
    assert [c["ok"] for c in outcome.checks] == [True, False]
    assert outcome.detail == f"{ST} > 0: {ST} = 0 (sum over 1 launch(es) of 1 profiled)"
    assert outcome.resources["ncu"] == ncu and outcome.isolation == "bwrap"


def test_counters_refused_to_the_sandbox_user_are_a_skip_with_the_reason(tmp_path: Path, toolchain: Toolchain) -> None:
    build, snippet = _fake_build_and_snippet(tmp_path, f'ncu="{LD} == 0"')
    refused = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters\n"
    outcome = ncu_step(build, snippet, GPU, toolchain, ncu=_fake_ncu(tmp_path, refused))
    assert outcome.status == "skipped" and "ERR_NVGPUCTRPERM" in outcome.detail


def test_ncu_stopped_otherwise_is_an_error_quoting_ncu(tmp_path: Path, toolchain: Toolchain) -> None:
    build, snippet = _fake_build_and_snippet(tmp_path, f'ncu="{LD} == 0"')
    stopped = "==ERROR== Failed to connect to the target process\n"
    outcome = ncu_step(build, snippet, GPU, toolchain, ncu=_fake_ncu(tmp_path, stopped))
    assert outcome.status == "error" and "Failed to connect to the target process" in outcome.detail
    assert ncu_step(build, snippet, None, toolchain, ncu="/nonexistent").status == "skipped"


def test_a_passing_ncu_record_reads_as_counters_on_the_gpu() -> None:
    from app.schemas import EvidencePublic
    from app.web.badges import step_badge

    record = EvidencePublic(
        record_id="r",
        snippet_id="t-ncu:1",
        target="sm_90",
        step="ncu",
        status="pass",
        stale=False,
        timestamp="2026-12-03T16:00:00Z",
        data={"gpu_name": "NVIDIA H200"},
    )
    assert step_badge(record, "sm_90").text == "Nsight Compute counters as asserted on NVIDIA H200"
