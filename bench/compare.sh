#!/usr/bin/env bash
# heed vs the PyTorch reference, alternating runs; see bench/compare.py --help.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/compare.py" "$@"
