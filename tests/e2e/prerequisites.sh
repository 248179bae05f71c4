#!/usr/bin/env bash
# What tests/e2e needs of the machine, checked by `make test` before it runs anything: with ../shared/kube
# beside the checkout, the pod runner (tests/e2e/podrunner: test_podrunner.py and the lifecycle test) needs
# root and iproute2's `ip`, as a kubelet does. A missing `ip` is installed with apt-get when we are root (CI
# is a Debian-like machine); anything else stops `make test` here with what to do, instead of those tests
# being skipped. PHALANX_E2E_WITHOUT_POD_RUNNER=1 skips them on purpose (each says why in pytest's report).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -e ../shared/kube/up.sh ] || exit 0  # no control plane: tests/e2e is skipped, with one line saying so
[ "${PHALANX_E2E_WITHOUT_POD_RUNNER:-}" = 1 ] && exit 0
fail() {
    echo "make test: $1; the pod-runner and lifecycle tests (tests/e2e) cannot run." >&2
    echo "  Run as root with iproute2 installed, or PHALANX_E2E_WITHOUT_POD_RUNNER=1 make test to skip them." >&2
    exit 1
}
[ "$(id -u)" = 0 ] || fail "not root (the pod runner makes network namespaces, veth links and mounts)"
if ! command -v ip >/dev/null && command -v apt-get >/dev/null; then
    echo "make test: installing iproute2 (ip) for the pod runner" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends iproute2 >&2 || true
fi
command -v ip >/dev/null || fail "iproute2's ip is not on PATH and could not be installed"
