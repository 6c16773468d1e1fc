"""Re-render every file of generated/ with the current kgen source, keeping its spec and its
measurement, and bring generated/index.json's build keys along (the committed files must be
what kgen makes today: tests/test_render.py). Run after any change to kgen/, from the repo root:

    python scripts/rerender_generated.py

It prints, per file, whether the build key (the hash of the CUDA source) changed: a changed key
means the measurement in the header was taken on an earlier build of the same variant (say so
in docs/perf.md, or re-search).
"""

import ast
import json
from pathlib import Path

from kgen.codegen import generator
from kgen.tune.spec import Spec

GENERATED = Path("generated")


def main():
    index_path = GENERATED / "index.json"
    index = json.loads(index_path.read_text())
    for path in sorted(GENERATED.glob("*.py")):
        text = path.read_text()
        # KGEN_SPEC and KGEN_MEASURED are literals: read them without running the file.
        ns = {t.id: ast.literal_eval(node.value) for node in ast.parse(text).body
              if isinstance(node, ast.Assign) for t in node.targets
              if isinstance(t, ast.Name) and t.id in ("KGEN_SPEC", "KGEN_MEASURED")}
        spec = Spec.from_dict(ns["KGEN_SPEC"])
        new = generator.render(spec, ns["KGEN_MEASURED"])
        entry = index["winners"].get(path.name)
        old_key = entry["key"] if entry else None
        if entry:
            entry["key"] = spec.key()
            entry["spec"] = spec.to_dict()   # the fields today's Spec has
            entry["reference_sha256"] = spec.reference().sha256
        print(f"{path.name}: key {'unchanged' if old_key == spec.key() else f'{old_key} -> {spec.key()}'}")
        generator.write_atomic(path, new)
    generator.write_atomic(index_path, json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main()
