"""CPU time of a `run` block's relocatable build: object (`-c`, before) against device code alone (`-cubin`, now).

    .venv/bin/python bench/bench_rdc_device_only.py [--wiki wiki] [--repeat 1]

For every cuda `run` block of the wiki and its first target, the relocatable
build is run both ways with plain nvcc in a scratch folder (no sandbox: its cost
is the same for both), interleaved (A, B, A, B …) so that a change in the
machine's load falls on both alike, and the CPU seconds of each (getrusage of the
children: user + system) are summed. It also checks that both ways keep the same
preprocessed source and report the same ptxas lines (less its `Compile time`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TIMEOUT_S = 300
_COMPILE_TIME = re.compile(r"^ptxas info\s*: Compile time = .*\n", re.M)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wiki", default=str(REPO / "wiki"))
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    from runner.compile import BASE_NVCC_FLAGS, RDC_OBJECT, gencode, rdc_device_only, snippet_nvcc_flags
    from runner.toolchain import discover_toolchain
    from runner.verify import load_snippets
    from snippets.build import build_translation_unit

    nvcc = discover_toolchain().nvcc or "nvcc"
    snippets, _ = load_snippets(args.wiki)
    blocks = [s for s in snippets if s.lang == "cuda" and s.mode == "run"]
    cpu = {"object": 0.0, "device_only": 0.0}
    same_ii = same_report = 0
    for _ in range(args.repeat):
        for snippet in blocks:
            tu = build_translation_unit(snippet)
            seen: dict[str, tuple[bytes, str]] = {}
            for way, tail in (("object", RDC_OBJECT), ("device_only", rdc_device_only(1))):
                with tempfile.TemporaryDirectory() as tmp:
                    folder = Path(tmp)
                    tu.write(folder)
                    (folder / "keep").mkdir()
                    argv = [nvcc, gencode(snippet.targets[0]), *BASE_NVCC_FLAGS, *snippet_nvcc_flags(snippet, compile_only=False)]
                    before = _cpu()
                    done = subprocess.run(
                        [*argv, tu.filename, *tail], cwd=folder, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
                    )
                    cpu[way] += _cpu() - before
                    ii = folder / "keep" / "snippet.cpp1.ii"
                    seen[way] = (ii.read_bytes() if ii.exists() else b"", _COMPILE_TIME.sub("", done.stderr))
            same_ii += seen["object"][0] == seen["device_only"][0]
            same_report += seen["object"][1] == seen["device_only"][1]
    runs = len(blocks) * args.repeat
    print(
        json.dumps(
            {
                "load_average_at_end": os.getloadavg(),
                "run_blocks": len(blocks),
                "repeat": args.repeat,
                "cpu_s_object": round(cpu["object"], 1),
                "cpu_s_device_only": round(cpu["device_only"], 1),
                "ratio": round(cpu["device_only"] / cpu["object"], 2) if cpu["object"] else None,
                "same_preprocessed_source": f"{same_ii}/{runs}",
                "same_ptxas_report": f"{same_report}/{runs}",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
