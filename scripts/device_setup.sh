# Sourced by the device scripts (each runs in the repository root on the device machine):
# installs kgen into the device image's Python, names the GPU, puts the tree on PYTHONPATH, and
# defines t, which prints a line stamped with the seconds since the script began.
python3 -m pip install -e . --no-deps --no-build-isolation -q 2>&1 | tail -2
nvidia-smi --query-gpu=name --format=csv,noheader
export PYTHONPATH=.
start=$(date +%s)
t() { echo "--- t=$(( $(date +%s) - start ))s: $*"; }
