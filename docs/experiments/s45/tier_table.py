"""Session 45: the 1e-2 tier's table from `kgen search` records (one search_*.json per file, the
runs of docs/experiments/device_session45_family.sh): per KernelBench file its winner, time, ratios
to eager fp32 and eager TF32 (measured beside it), its error against fp64 and the fastest cuBLAS
candidate measured in the same search; then the medians and the winners' families.

    python docs/experiments/s45/tier_table.py docs/logs/2026-11-29_h200_s45_*_family

A file searched in more than one of the folders: the last folder's record (a later search's).
"""

import glob
import json
import re
import statistics
import sys
from collections import Counter


def variant(spec: dict) -> str:
    return f"{spec['backend']} {spec['math']}" + (f" f{spec['fusion']}" if spec["backend"] == "wgmma" else "")


def main(*folders):
    rows = {}
    for folder in folders:
        for path in glob.glob(f"{folder}/search_*.json"):
            record = json.load(open(path))
            number = int(re.match(r"(\d+)_", record["search"]).group(1))
            winner = record["winners"].get("0.01")
            cublas = [c["measured"]["median_ms"] for c in record["candidates"]
                      if c["status"] == "passed" and c["spec"]["backend"] == "cublas" and c.get("measured")]
            rows[number] = (number, winner, min(cublas) if cublas else None)
    rows = [rows[n] for n in sorted(rows)]
    print("| KernelBench | winner | ms | x eager fp32 | x eager TF32 | max abs err vs fp64 | fastest cuBLAS measured |")
    print("|---|---|---|---|---|---|---|")
    vs_fp32, vs_tf32, families = [], [], Counter()
    for number, w, cublas in rows:
        if w is None:
            print(f"| {number} | none | | | | | |")
            continue
        m = w["measured"]
        tf32 = m["median_ms"] / m["eager_tf32_ms"]
        vs_fp32.append(m["ratio"])
        vs_tf32.append(tf32)
        families[variant(w["spec"]).rsplit(" f", 1)[0]] += 1
        print(f"| {number} | {variant(w['spec'])} | {m['median_ms']:.3f} | {m['ratio']:.3f} | {tf32:.3f} | "
              f"{m['max_abs_err']:.1e} | {'' if cublas is None else f'{cublas:.3f}'} |")
    print(f"\n{len(vs_fp32)} files; median x eager fp32 {statistics.median(vs_fp32):.3f}, "
          f"x eager TF32 {statistics.median(vs_tf32):.3f}; winners: "
          + ", ".join(f"{k} {v}" for k, v in families.most_common()))


if __name__ == "__main__":
    main(*sys.argv[1:])
