"""The family's training-step table from `kgen bench --training` logs (one per KernelBench file,
named train_NN.log): ms, x eager, and the gradient whose error is furthest above eager's.

    python3 docs/experiments/s37/training_table.py LOG_DIR
"""
import re
import statistics
import sys
from pathlib import Path


def main(folder):
    rows, ratios = [], []
    for log in sorted(Path(folder).glob("train_*.log"), key=lambda p: int(re.findall(r"\d+", p.name)[0])):
        text = log.read_text()
        num = re.findall(r"\d+", log.name)[0]
        new = re.search(r"^ModelNew\s+([\d.]+) ms", text, re.M)
        eager = re.search(r"^eager \w+\s+([\d.]+) ms", text, re.M)
        if not (new and eager):
            last = [l for l in text.strip().splitlines() if l.strip()][-1:] or ["(empty)"]
            rows.append(f"| {num} | | | | failed: {last[0][:120]} |")
            continue
        new, eager = float(new.group(1)), float(eager.group(1))
        grads = re.findall(r"^  (\S+)\s+(\S+) / (\S+)  \((\S+)\)$", text, re.M)
        worst = max(grads, key=lambda g: float(g[1]) / max(float(g[2]), 1e-30))
        ratios.append(new / eager)
        judged = (f"{worst[0]} {float(worst[1]):.1e} (eager {float(worst[2]):.1e}, of {float(worst[3]):.1e})"
                  if any(float(g[3]) for g in grads) else "every gradient 0, as fp64's (the output does not depend on them at these inputs)")
        rows.append(f"| {num} | {new:.3f} | {eager:.3f} | **{new / eager:.3f}** | {judged} |")
    print("| KernelBench | kgen step ms | eager step ms | x eager | gradient furthest above eager's: kgen (eager, scale) |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    if ratios:
        print(f"\nmedian x eager over {len(ratios)} files: {statistics.median(ratios):.3f}; "
              f"at or below 0.75x: {sum(r <= 0.75 for r in ratios)}; below 1.0x: {sum(r < 1 for r in ratios)}")


if __name__ == "__main__":
    main(sys.argv[1])
