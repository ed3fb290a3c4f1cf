#!/bin/bash
# On the offline H200 node, from the repository root: the runner's GPU tests and the whole wiki re-verified
# under the current sandbox rules (bwrap + seccomp, readback through the sandbox, cgroup required).
# It expects a git-ignored folder .h200/ carried with the tree, holding Debian's bubblewrap .deb
# (apt-get download bubblewrap) and in .h200/wheels/ the runner's wheels for Python 3.12
# (pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
#  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
#  pyyaml markdown-it-py mdurl google-re2 pytest iniconfig pluggy packaging pygments pydantic pydantic-core
#  annotated-types typing-extensions typing-inspection; pydantic because tests/runner/test_runner_ncu.py reads its
#  records through app.evidence.ingest. The H200 image has CuPy and NumPy: carrying cupy-cuda13x, fastrlock and
#  numpy is needed only on a node without them, and they exceed the device tool's 64 MiB carry).
# The GPU tests run in the GPU lane (KERNELWIKI_GPU_LANE=1, tests/ci.py): a missing GPU or CuPy fails them
# instead of skipping, and KERNELWIKI_CGROUP=require makes a missing cgroup v2 a failure too.
# Results land in $OUT: doctor.json, pytest-gpu.txt, verify.txt, h200.jsonl.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p /tmp/bw && dpkg -x .h200/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
bwrap --version; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2
python3 -m runner doctor > $OUT/doctor.json 2>&1; tail -8 $OUT/doctor.json
KERNELWIKI_GPU_LANE=1 KERNELWIKI_CGROUP=require timeout 240 python3 -m pytest tests/runner -m gpu -q -rs -p no:cacheprovider > $OUT/pytest-gpu.txt 2>&1; echo "pytest rc=$?"; tail -25 $OUT/pytest-gpu.txt
( time KERNELWIKI_CGROUP=require timeout 240 python3 -m runner verify --wiki wiki --no-cache --jobs 14 --isolation bwrap --cache-dir /tmp/kwcache --report $OUT/h200.jsonl ) > $OUT/verify.txt 2>&1; echo "verify rc=$?"; grep -vE '^\[[0-9]+/' $OUT/verify.txt | tail -14
python3 -c "import json,collections as c;r=[json.loads(l) for l in open('$OUT/h200.jsonl')];print(c.Counter((x['step'],x['status']) for x in r));[print('BAD',x['snippet_id'],x['target'],x['step'],x['status'],x.get('message','')[:300]) for x in r if x['status'] in('fail','error','timeout')]"
grep -h Seccomp /proc/self/status
