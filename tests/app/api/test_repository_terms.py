"""A KernelWiki repository's names served end to end: data/aliases.yaml's names go to the page about each term, and
`/a/NAME`, resolve and search find that page first, never a source page or a page whose id only ends in the term; a page
id with capitals, asked in any case, names its page.

The repository is written here, in the KernelWiki format, with the shapes of the public one that went wrong: a doc page
whose id ends in `-tma`, one ending in `-sm100`, and a migration page ending in `-tcgen05`, beside the pages about them;
a PR page `pr-TensorRT-LLM-10042` and a page citing it throughout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

ALIASES = """\
tma:
  - "tensor memory accelerator"
  - TMA
  - cp.async.bulk
sm100:
  - B200
  - SM100
tcgen05:
  - UMMA
  - tcgen05.mma
tmem:
  - "tensor memory"
  - TMEM
"""

SCHEMAS = """\
wiki-hardware:
  required: [id, title, type]
  constraints:
    id_prefix: hw-
wiki-technique:
  required: [id, title, type]
  constraints:
    id_prefix: technique-
wiki-migration:
  required: [id, title, type]
  constraints:
    id_prefix: migration-
source-doc:
  required: [id, title]
source-pr:
  required: [id, title]
"""

TAGS = """\
architectures: [sm90a, sm100a, blackwell]
"""

PAGES = {
    "wiki/hardware/tma.md": """\
---
id: hw-tma
title: Tensor Memory Accelerator (TMA)
type: hardware
architectures: [sm90a, sm100a]
aliases: [TMA]
---

# Tensor Memory Accelerator

One thread issues `cp.async.bulk` and an mbarrier counts the bytes that land in shared memory.
""",
    "sources/docs/cuda-13-0-2-tma.md": """\
---
id: doc-cuda-13-0-2-tma
title: CUDA 13.0.2 guide, asynchronous bulk copies
architectures: [sm90a, sm100a]
---

# Bulk copies

`cp.async.bulk` copies a tile. `cp.async.bulk` completes on an mbarrier. `cp.async.bulk` needs aligned addresses.
On B200 and H200 alike, `cp.async.bulk` moves whole tiles; `cp.async.bulk` has a tensor form.
""",
    "sources/docs/ptx-isa-sm100.md": """\
---
id: doc-ptx-isa-sm100
title: PTX ISA for the sm_100 family
architectures: [sm100a]
---

# sm_100

B200 adds `tcgen05.mma`. B200 has tensor memory. B200 runs `tcgen05.mma` from one thread. B200, B200, B200.
""",
    "wiki/migration/wgmma-to-tcgen05.md": """\
---
id: migration-wgmma-to-tcgen05
title: Moving from wgmma to tcgen05
type: migration
---

# From wgmma

`wgmma` becomes `tcgen05.mma`; `tcgen05.mma` writes tensor memory; every `tcgen05.mma` is issued by one thread (UMMA).
""",
    "wiki/hardware/tcgen05-mma.md": """\
---
id: hw-tcgen05-mma
title: The fifth-generation tensor core instruction
type: hardware
architectures: [sm100a]
aliases: [tcgen05]
---

# The instruction

`tcgen05.mma` reads its operands from shared memory.
""",
    "wiki/hardware/sm100.md": """\
---
id: hw-sm100
title: The Blackwell streaming multiprocessor
type: hardware
architectures: [sm100a, blackwell]
---

# SM

Datacenter parts.

```cuda
__global__ void touch(int* out) { out[threadIdx.x] = 1; }
```
""",
    # Two pages claim tmem: hw-tmem by its id alone, technique-tmem-allocation by naming TMEM in its own aliases.
    "wiki/hardware/tmem.md": """\
---
id: hw-tmem
title: On-chip accumulator storage
type: hardware
architectures: [sm100a]
---

# Storage

Allocated in columns.
""",
    "wiki/techniques/tmem-allocation.md": """\
---
id: technique-tmem-allocation
title: Allocating accumulator columns
type: technique
aliases: [TMEM]
---

# Allocating

One warp allocates, every warp reads.
""",
    # An id with capitals, and a page that cites it throughout (it outranked the PR page by its words).
    "sources/prs/TensorRT-LLM/PR-10042.md": """\
---
id: pr-TensorRT-LLM-10042
title: Fuse the gate into the grouped GEMM
repo: NVIDIA/TensorRT-LLM
pr: 10042
---

# Description

One launch instead of two.
""",
    "wiki/kernels/tensorrt-llm-moe-gemm.md": """\
---
id: kernel-tensorrt-llm-moe-gemm
title: TensorRT-LLM grouped GEMM for mixture-of-experts layers (PR 10042)
type: kernel
architectures: [sm100a]
sources: [pr-TensorRT-LLM-10042]
---

# Grouped GEMM

TensorRT-LLM PR 10042 fused the gate: pr-TensorRT-LLM-10042 keeps one launch in TensorRT-LLM for MoE layers.
""",
    # A page that declares only the family: its words never say it.
    "sources/prs/demo/PR-5.md": """\
---
id: pr-demo-5
title: Fused MoE routing
repo: example/demo
pr: 5
architectures: [blackwell]
---

# Description

Routes each token to its experts in one launch.
""",
}


def write_repository(root: Path) -> Path:
    """The repository above under `root` (a KernelWiki layout: wiki/, sources/, data/)."""
    (root / "data").mkdir(parents=True)
    (root / "data" / "aliases.yaml").write_text(ALIASES)
    (root / "data" / "schemas.yaml").write_text(SCHEMAS)
    (root / "data" / "tags.yaml").write_text(TAGS)  # its vocabulary allows the family
    for rel, text in PAGES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def wiki_dir(tmp_path: Path) -> Path:
    return write_repository(tmp_path / "repo")


def _target(live: httpx.Client, name: str) -> str | None:
    found = live.get(f"/a/{name}")
    return found.headers["location"].removeprefix("/pages/") if found.status_code == 302 else None


def _first(live: httpx.Client, query: str) -> str:
    return str(live.get("/api/search", params={"q": query}).json()["results"][0]["id"])


def test_a_global_term_goes_to_the_page_about_it_and_a_and_search_find_that_page_first(live) -> None:  # noqa: ANN001
    for name, page in [
        ("TMA", "hw-tma"),  # its own alias; the doc page whose id ends in -tma took it before
        ("cp.async.bulk", "hw-tma"),  # merged: hw-tma names the term tma in its own aliases
        ("tensor memory accelerator", "hw-tma"),
        ("B200", "hw-sm100"),  # merged by its id (hw- is the type's id_prefix), not to doc-ptx-isa-sm100
        ("UMMA", "hw-tcgen05-mma"),  # its own aliases name tcgen05; the migration page's id only ends in it
        ("tcgen05.mma", "hw-tcgen05-mma"),
        ("TMEM", "technique-tmem-allocation"),  # two claimants: the page listing TMEM in its own aliases wins
        ("tensor memory", "technique-tmem-allocation"),  # ... for every name of the term, over hw-tmem's id
    ]:
        assert _target(live, name) == page, name
        assert live.get("/api/resolve", params={"name": name}).json()["id"] == page, name
        assert _first(live, name) == page, name
    for page in ("doc-cuda-13-0-2-tma", "doc-ptx-isa-sm100", "migration-wgmma-to-tcgen05"):
        assert live.get(f"/api/pages/{page}").json()["meta"]["aliases"] == [], page
    assert "tensor memory" in live.get("/api/pages/hw-tmem").json()["meta"]["aliases"]  # it claims too, but ranks below
    # The words still find the pages that use them most; the page about the term leads.
    found = [r["id"] for r in live.get("/api/search", params={"q": "cp.async.bulk tiles"}).json()["results"]]
    assert "doc-cuda-13-0-2-tma" in found


def test_a_query_that_is_a_page_id_in_any_case_finds_that_page_first(live) -> None:  # noqa: ANN001
    for name in ("pr-TensorRT-LLM-10042", "pr-tensorrt-llm-10042", "PR-TENSORRT-LLM-10042"):
        assert _first(live, name) == "pr-TensorRT-LLM-10042", name
        assert _target(live, name) == "pr-TensorRT-LLM-10042", name
        assert live.get("/api/resolve", params={"name": name}).json()["id"] == "pr-TensorRT-LLM-10042", name
    found = [r["id"] for r in live.get("/api/search", params={"q": "TensorRT-LLM 10042"}).json()["results"]]
    assert found[0] == "kernel-tensorrt-llm-moe-gemm"  # words, not the id: the page that uses them most leads


def _ids(live: httpx.Client, **params: str) -> list[str]:
    answer = live.get("/api/search", params=params)
    assert answer.status_code == 200, answer.text
    return [r["id"] for r in answer.json()["results"]]


def test_an_architecture_family_is_kept_for_facets_the_arch_filter_and_search_and_never_built(
    live,  # noqa: ANN001
    wiki_dir: Path,
    tmp_path: Path,
) -> None:
    assert live.get("/api/pages/pr-demo-5").json()["meta"]["architectures"] == ["blackwell"]
    hw = live.get("/api/pages/hw-sm100").json()
    assert hw["meta"]["architectures"] == ["sm100a", "blackwell"]
    assert [s["targets"] for s in hw["snippets"]] == [["sm_100a"]]  # the family is no build target
    # the arch filter: the pages that declare the family (in any case), not every sm100 page
    assert set(_ids(live, q="moe")) == {"pr-demo-5", "kernel-tensorrt-llm-moe-gemm"}
    for arch in ("blackwell", "Blackwell"):
        assert _ids(live, q="moe", arch=arch) == ["pr-demo-5"], arch
    assert _ids(live, q="moe", arch="sm100") == ["kernel-tensorrt-llm-moe-gemm"]
    # the word finds the pages that declare it, though their text never says it
    assert set(_ids(live, q="blackwell")) >= {"pr-demo-5", "hw-sm100"}
    searched = live.get("/api/search", params={"q": "moe", "facets": "arch"}).json()
    assert searched["facets"]["arch"] == {"blackwell": 1, "sm100": 1}
    # the listing, its facets (the home page's) and the by-architecture view
    listed = live.get("/api/pages", params={"arch": "blackwell"}).json()
    assert sorted(p["id"] for p in listed["pages"]) == ["hw-sm100", "pr-demo-5"]
    assert live.get("/api/pages").json()["facets"]["arch"]["blackwell"] == 2
    view = live.get("/api/queries/by-architecture").json()
    assert {g["value"]: [p["id"] for p in g["pages"]] for g in view["groups"]}["blackwell"] == ["hw-sm100", "pr-demo-5"]
    assert live.get("/api/search", params={"q": "moe", "arch": "volta"}).status_code == 422  # a name no list has
    # the command line asks the same searcher
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "search", "moe", "--arch", "blackwell", "--json"]
        + ["--wiki", str(wiki_dir), "--db", f"sqlite:///{tmp_path / 'cli.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert [r["id"] for r in json.loads(done.stdout)["results"]] == ["pr-demo-5"]
