# Session 35, call A: what session 34 changed after its device time was spent.
# 1. The whole 16-bit GPU tier, its fixtures building fp32, bf16 and fp16 up front (7e29a3c).
# 2. The review's two fixed paths (d2d0a35): a module reading its BatchNorm's running mean before
#    the BatchNorm (plain loads of the running buffers), and a tile of 96 columns over one warp
#    (tile_store's general walk), each through the full gate.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t fixed paths
python3 -c "import tests.test_param_loads as m; open('/tmp/rm.py', 'w').write(m.REFERENCE.replace('BN', 'self.bn'))"
python3 -m kgen.cli generate /tmp/rm.py -o /tmp/rm_new.py --force | tail -2
python3 -m kgen.cli validate /tmp/rm_new.py 2>&1 | tail -4
python3 -m kgen.cli generate /tmp/rm.py --dtype bf16 -o /tmp/rm_bf16.py --force | tail -1
python3 -m kgen.cli validate /tmp/rm_bf16.py --dtype bf16 2>&1 | tail -4
python3 -m kgen.cli generate .kb/level2/12_*.py --backend kgen --math tf32x3 --tile 16x96x32 --warp 16x96 --stages 3 -o /tmp/odd.py --force | tail -1
python3 -m kgen.cli validate /tmp/odd.py 2>&1 | tail -4
t 16-bit tier
gpu_tests half.log 480 tests/test_half_gpu.py
t done
