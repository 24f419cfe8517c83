#!/usr/bin/env bash
# Set up (once) and run the tests: `./test.sh` (extra arguments go to pytest, e.g. ./test.sh -m "not slow"). The tests
# run on every core (-n auto, as CI runs them); -n 0 runs them one at a time.
# GPU tests are marked `gpu` and skip without a GPU; the report test needs Debian's chromium (installed here if missing).
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/pytest ] || [ requirements-test.txt -nt .venv/.installed-test ] || [ requirements.txt -nt .venv/.installed-test ] \
    || [ requirements.lock -nt .venv/.installed-test ]; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -r requirements-test.txt -c requirements.lock  # every package at its locked version
  touch .venv/.installed-test
fi
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "test.sh: could not install chromium; the report rendering test will say why" >&2
fi
exec .venv/bin/python -m pytest -n auto "$@"
