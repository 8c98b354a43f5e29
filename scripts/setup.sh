#!/usr/bin/env bash
# Installs what codecell needs on a Debian or Ubuntu machine, builds it and
# puts it on PATH. Safe to run again: it installs only what is missing.
#
#   CODECELL_EXTRA_PACKAGES="python3-sklearn python3-seaborn" scripts/setup.sh
#
# adds more Debian packages to the sandbox's Python (any python3-* package).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/setup.sh: run as root (sudo): it installs packages and codecell itself runs as root" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "scripts/setup.sh: needs a Debian or Ubuntu machine (apt-get)" >&2
  exit 1
fi

# The sandbox: bubblewrap for namespaces, e2fsprogs and util-linux for the
# per-sandbox disk quota (an ext4 image on a loop device).
packages=(bubblewrap e2fsprogs util-linux ca-certificates)
# The Python data-analysis set, from Debian (the sandbox runs /usr/bin/python3).
packages+=(python3 python3-ipython python3-ipykernel python3-matplotlib-inline
  python3-numpy python3-pandas python3-matplotlib python3-scipy python3-openpyxl)
# Jupyter kernels besides Python: R through IRkernel. jupyter_client is the
# benchmark's baseline; jupyter-server is the remote endpoint of the tests.
packages+=(r-cran-irkernel python3-jupyter-client python3-jupyter-server)
# shellcheck disable=SC2206
packages+=(${CODECELL_EXTRA_PACKAGES:-})
if ! command -v node >/dev/null || [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -lt 18 ]; then
  packages+=(nodejs)
fi
# npm installs the TypeScript MCP SDK the tests drive codecell with
# (Debian's nodejs comes without it; NodeSource's includes it).
if ! command -v npm >/dev/null; then
  packages+=(npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  say "system packages: all present (${#packages[@]})"
fi

# Go builds codecell; the module proxy supplies its dependencies.
export PATH="/usr/local/go/bin:$PATH"
if ! command -v go >/dev/null; then
  echo "scripts/setup.sh: Go 1.26 or newer is needed to build codecell (https://go.dev/doc/install, into /usr/local/go)" >&2
  exit 1
fi
say "building codecell with $(go version | cut -d' ' -f3)"
go build -trimpath -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/codecell ./cmd/codecell
install -m 0755 bin/codecell /usr/local/bin/codecell
say "installed /usr/local/bin/codecell; checking the host:"
codecell doctor
