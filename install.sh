#!/bin/sh
# Install kafkatx from this checkout into its own environment and put the `kafkatx` command in
# ~/.local/bin (the README's first command). Works on a stock Debian/Ubuntu machine, where the
# system Python refuses `pip install` (PEP 668, externally-managed-environment):
#   - with pipx on PATH: `pipx install --force .` (pipx's own venv; the command lands in ~/.local/bin);
#   - otherwise: a venv at $KAFKATX_VENV (default ~/.venvs/kafkatx) made by python3, kafkatx installed
#     into it, and ~/.local/bin/kafkatx linked to the venv's script.
# Re-running it upgrades the install in place. Extras: KAFKATX_EXTRAS=spark for `kafkatx scan`.
# Env: PYTHON (default python3), KAFKATX_VENV, KAFKATX_BIN_DIR (default ~/.local/bin), KAFKATX_NO_PIPX=1.
set -eu
cd "$(dirname "$0")"
bin_dir="${KAFKATX_BIN_DIR:-$HOME/.local/bin}"
spec="."
[ -n "${KAFKATX_EXTRAS:-}" ] && spec=".[${KAFKATX_EXTRAS}]"

if [ -z "${KAFKATX_NO_PIPX:-}" ] && command -v pipx >/dev/null 2>&1; then
  PIPX_BIN_DIR="$bin_dir" pipx install --force "$spec" >&2
  echo "install.sh: kafkatx installed with pipx: $bin_dir/kafkatx" >&2
  exit 0
fi

python="${PYTHON:-python3}"
command -v "$python" >/dev/null 2>&1 || {
  echo "install.sh: no $python on PATH: install Python 3.11 or newer (Debian: apt install python3 python3-venv)" >&2
  exit 2
}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "install.sh: kafkatx needs Python 3.11 or newer; $python is $("$python" -V 2>&1)" >&2
  exit 2
}
venv="${KAFKATX_VENV:-$HOME/.venvs/kafkatx}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2 || {
    echo "install.sh: '$python -m venv' failed (Debian/Ubuntu: apt install python3-venv, or install pipx)" >&2
    rm -rf "$venv"
    exit 2
  }
fi
"$venv/bin/python" -m pip install -q --upgrade "$spec" >&2
mkdir -p "$bin_dir"
ln -sf "$venv/bin/kafkatx" "$bin_dir/kafkatx"
echo "install.sh: kafkatx installed in $venv; command: $bin_dir/kafkatx" >&2
case ":$PATH:" in
  *":$bin_dir:"*) ;;
  *) echo "install.sh: add $bin_dir to PATH to type just 'kafkatx'" >&2 ;;
esac
