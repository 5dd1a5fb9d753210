# The execrl sandbox service (`execrl sandbox serve`) as a container image.
#
#   docker build -t execrl-sandbox .
#   docker run --rm -p 8080:8080 --cap-add SYS_ADMIN ... execrl-sandbox      (see deploy/k8s/README.md)
#
# Only what the service imports is installed: aiohttp and pydantic, never torch (the sandbox, like the
# rest of execrl's sandbox package, has no torch import). The toolchains are those the sandbox registers
# (execrl.sandbox.langs.registry): python (this image's own interpreter, bound read-only into every jail) and
# the Debian package named by each other language's `package` (gcc, g++, rustc, golang-go,
# default-jdk-headless, nodejs, node-typescript, bash). A test (tests/unit/deploy) keeps this list in
# step with the registry.
#
# Runs as root INSIDE the container, on purpose and unavoidably: the service itself creates pid/mount/
# ipc/uts/cgroup/network namespaces, mounts tmpfs and /proc for each jail, writes per-slot cgroups and
# switches each candidate to an unprivileged per-slot uid (setuid/setgid) after emptying its capability
# bounding set. Those operations need CAP_SYS_ADMIN, CAP_SETUID/SETGID and CAP_SETPCAP in the user
# namespace that owns the namespaces; a non-root user has none of them. Untrusted programs never run as
# root: each runs as a capability-less slot uid with no_new_privs and a seccomp filter. To make the
# container's root unprivileged on the host as well, run the pod in a Kubernetes user namespace
# (hostUsers: false; see deploy/k8s/README.md for what that needs).
#
# The base is pinned to a Python patch release and a Debian suite (was python:3.11-slim-bookworm, which
# moves to every new 3.11.x): the toolchains below and the jail's read-only view of the interpreter are
# what deploy/k8s was checked against. The tag still gets Debian security rebuilds; for a byte-identical
# base append the digest `docker buildx imagetools inspect python:3.11.14-slim-bookworm` prints
# (@sha256:...; not done here: the build machine cannot reach a registry to read it) and bump both
# together.
FROM python:3.11.14-slim-bookworm

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       gcc g++ rustc golang-go default-jdk-headless nodejs node-typescript bash \
       junit5 libssl-dev golang-github-stretchr-testify-dev node-lodash \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/execrl
COPY pyproject.toml README.md ./
COPY src ./src
# --no-deps: the package's full dependency list (torch, transformers, ...) is for training, not serving.
RUN pip install --no-cache-dir --no-deps . \
    && pip install --no-cache-dir "aiohttp>=3.9" "pydantic>=2.6" \
    && python -c "import execrl.sandbox.service.server, execrl.cli"

COPY deploy/sandbox-entrypoint.sh /usr/local/bin/sandbox-entrypoint
RUN chmod 0755 /usr/local/bin/sandbox-entrypoint

USER 0:0
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sandbox-entrypoint"]
CMD ["execrl", "sandbox", "serve", "--host", "0.0.0.0", "--port", "8080", "--workers", "4"]
