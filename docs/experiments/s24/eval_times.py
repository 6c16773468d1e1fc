"""Session 24: a search worker's evaluation of several files in one process (as a search streams
its candidates to it), each file's seconds from the worker's output lines. Usage:
    python eval_times.py FILE...   (the files built beforehand)"""
import subprocess
import sys
import time

files = sys.argv[1:]
proc = subprocess.Popen([sys.executable, "-m", "kgen.tune.worker", "evaluate", "--tol", "1e-4", "-"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
start = last = time.monotonic()
for path in files:
    proc.stdin.write(path + "\n")
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            sys.exit(f"the worker ended early (exit {proc.wait()})")
        if line.startswith("KGEN_RESULT "):
            now = time.monotonic()
            status = line.split('"status": "')[1].split('"')[0]
            print(f"{now - last:6.2f} s  {status:8s} {path}", flush=True)
            last = now
            break
proc.stdin.close()
proc.wait()
print(f"{time.monotonic() - start:6.2f} s in all")
