#!/usr/bin/env bash
# Installs ReFrame (reframe-hpc 4.10.x from PyPI, Python >= 3.10) into a
# virtual environment of its own, never system-wide:
#   ${HIMENO_REFRAME_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/himeno-reframe/venv}
# where the tests (tests/system/reframe.rs) look for bin/reframe. Installed
# once; later runs only check. Prints the reframe path on stdout.
#
# Then: "$(scripts/install-reframe.sh)" -C reframe/config.py -c reframe/himeno.py -r
set -euo pipefail
# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
if (($#)); then
    case $1 in
        -h|--help) usage; exit 0 ;;
        *) echo "install-reframe.sh: takes no arguments, only --help (got '$1')" >&2; exit 2 ;;
    esac
fi
export PIP_ROOT_USER_ACTION=ignore
VENV=${HIMENO_REFRAME_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/himeno-reframe/venv}
SPEC='reframe-hpc>=4.10,<4.11'

installed() {
    [ -x "$VENV/bin/reframe" ] && [[ $("$VENV/bin/reframe" --version 2> /dev/null) == 4.10.* ]]
}
if ! installed; then
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
        { echo "install-reframe.sh: ReFrame 4.10 needs Python 3.10 or newer" >&2; exit 1; }
    # A half-made environment (an interrupted install) is made anew.
    if [ ! -x "$VENV/bin/pip" ]; then
        rm -rf "$VENV"
        python3 -m venv "$VENV" ||
            { echo "install-reframe.sh: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
    fi
    "$VENV/bin/pip" install -q --disable-pip-version-check "$SPEC" >&2 ||
        { echo "install-reframe.sh: pip could not install $SPEC into $VENV" >&2; exit 1; }
    installed || { echo "install-reframe.sh: $VENV/bin/reframe is not ReFrame 4.10" >&2; exit 1; }
fi
echo "$VENV/bin/reframe"
