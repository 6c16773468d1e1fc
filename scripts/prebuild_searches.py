"""Compile the candidates of several searches in one parallel batch (the GPU machine has 16
cores; torch caches each build by name, so the searches that follow only load them).

    python scripts/prebuild_searches.py PROBLEM:BATCH:IN:OUT ... [--math M ...] [--top N]
"""
import argparse
import os
from pathlib import Path

from kgen import generator
from kgen.search import Candidate, build_all, enumerate_specs

parser = argparse.ArgumentParser()
parser.add_argument("searches", nargs="+")
parser.add_argument("--math", action="append")
parser.add_argument("--top", type=int)
args = parser.parse_args()
candidates = []
for s in args.searches:
    problem, batch, n_in, n_out = s.split(":")
    shape = f"{problem}_b{batch}_i{n_in}_o{n_out}"
    for spec in enumerate_specs(problem, int(batch), int(n_in), int(n_out), tuple(args.math), top=args.top):
        path = generator.write(spec, Path(".kgen_work") / shape / f"{spec.name()}.py")
        candidates.append(Candidate(spec, path))
build_all(candidates, jobs=os.cpu_count() or 1, timeout=900, echo=print)
