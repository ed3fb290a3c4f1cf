# kernelwiki images (docs/deploy.md):
#   docker build --target service -t kernelwiki-service .   # the API and docs browser: `kernelwiki serve`
#   docker build --target runner  -t kernelwiki-runner  .   # a GPU worker with nvcc: `kernelwiki worker --target …`
# Both install the same wheel, built once in the first stage, from /dist alone (pip --no-index).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-devel-ubuntu24.04
ARG KERNELWIKI_VERSION=0.1.0

# -- build: the kernelwiki wheel (pure Python) -----------------------------------
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY snippets ./snippets
COPY runner ./runner
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

# -- service: slim Python, no CUDA -------------------------------------------------
FROM ${PYTHON_IMAGE} AS service
ARG KERNELWIKI_VERSION
COPY --from=build /dist /dist
# Our own wheel from /dist only (--no-index: a same-named package on an index can never replace it),
# then its dependencies, which the installed kernelwiki already names.
RUN pip install --no-cache-dir --no-index --no-deps /dist/kernelwiki-${KERNELWIKI_VERSION}-py3-none-any.whl \
    && pip install --no-cache-dir "kernelwiki[pg]==${KERNELWIKI_VERSION}" \
    && rm -rf /dist \
    && groupadd --gid 10001 kernelwiki \
    && useradd --uid 10001 --gid 10001 --create-home kernelwiki \
    && mkdir -p /srv/kernelwiki/.kernelwiki \
    && chown -R 10001:10001 /srv/kernelwiki
WORKDIR /srv/kernelwiki
COPY --chown=10001:10001 wiki ./wiki
COPY --chown=10001:10001 evidence ./evidence
USER 10001:10001
ENV KERNELWIKI_HOST=0.0.0.0 \
    KERNELWIKI_PORT=8000 \
    KERNELWIKI_WIKI=/srv/kernelwiki/wiki \
    KERNELWIKI_EVIDENCE=/srv/kernelwiki/evidence \
    KERNELWIKI_DB=sqlite:////srv/kernelwiki/.kernelwiki/index.db
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/api/health', timeout=4)"]
CMD ["kernelwiki", "serve"]

# -- runner: NVIDIA's CUDA devel image (nvcc, ptxas, cuobjdump) + a GPU worker --------
FROM ${CUDA_IMAGE} AS runner
ARG KERNELWIKI_VERSION
# bubblewrap sandboxes snippet processes (docs/sandbox.md); without it the worker refuses to start. As a non-root
# user it needs user namespaces: run with --security-opt seccomp=unconfined (or a profile allowing unshare).
# The CUDA image pins its own packages, these follow the base release.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/kernelwiki \
    && groupadd --gid 10001 kernelwiki \
    && useradd --uid 10001 --gid 10001 --create-home kernelwiki
COPY --from=build /dist /dist
RUN /opt/kernelwiki/bin/pip install --no-cache-dir --no-index --no-deps /dist/kernelwiki-${KERNELWIKI_VERSION}-py3-none-any.whl \
    && /opt/kernelwiki/bin/pip install --no-cache-dir "kernelwiki[pg]==${KERNELWIKI_VERSION}" \
    && rm -rf /dist
USER 10001:10001
WORKDIR /home/kernelwiki
ENV PATH=/opt/kernelwiki/bin:/usr/local/cuda/bin:${PATH} \
    KERNELWIKI_WORKER_CACHE=/home/kernelwiki/cache
ENTRYPOINT ["kernelwiki", "worker"]
CMD ["--target", "sm_90", "--target", "sm_90a"]
