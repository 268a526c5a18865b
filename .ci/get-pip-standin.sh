#!/usr/bin/env bash
# ansible-test sanity/units download a pip bootstrap script (get-pip.py) from a host CI cannot reach. Save a stand-in
# (.ci/get_pip_standin.py: runs pip from the pip wheel fetched from PyPI) in ansible-test's cache first.
# Usage: get-pip-standin.sh PYTHON_OF_THE_ANSIBLE_TEST PIP_TO_DOWNLOAD_WITH
set -euo pipefail
python=$1 pip=$2
pipv=$("$python" -c 'import re, inspect, ansible_test._internal.python_requirements as r; print(re.search(r"pip=.([0-9.]+)", inspect.getsource(r.get_venv_packages)).group(1))')
cache=~/.ansible/test/cache
if [ ! -f "$cache/get_pip_${pipv//./_}.py" ]; then
  mkdir -p "$cache"
  "$pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$cache" "pip==$pipv"
  cp "$(dirname "$0")/get_pip_standin.py" "$cache/get_pip_${pipv//./_}.py"
fi
