# Session 26, one H100 call (carry .kb), ~9 min:
#  1. where a warm worker's evaluation and the winner's full validation spend their time for the
#     README's main job (cold main job 39.2 s at 6e8e843: 4 evaluations ~15 s, full validation
#     9.6 s; issue 25's goal 30 s): docs/experiments/s26/profile_eval.py under cProfile;
#  2. issue 25 item 2 at today's code for NUMS (default 30 99): device_session25_batches.sh.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "compileall"
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
t "generate the main job's file, profile its evaluation"
mkdir -p /tmp/p && python3 -m kgen.cli generate --in 8192 --out 8192 -o /tmp/p/main.py > $OUT/s26_profile.log 2>&1
timeout 150 python3 docs/experiments/s26/profile_eval.py /tmp/p/main.py >> $OUT/s26_profile.log 2>&1
echo "exit $?"; grep "^===" $OUT/s26_profile.log
NUMS=${NUMS:-30 99} KB_LIMIT=${KB_LIMIT:-190} bash docs/experiments/device_session25_batches.sh
