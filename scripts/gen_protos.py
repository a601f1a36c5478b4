"""Generate the Python code of protos/namesrv/v1 into src/ (package ``namesrv.v1``).

Run as ``python scripts/gen_protos.py [OUT_DIR]`` (default ``src``); ``make proto`` calls it.
The generated files are committed and never edited by hand; ``tests/test_generated_code.py``
regenerates them into a temporary directory and fails when they differ.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"


def generate(out_dir: Path) -> None:
    """Run protoc (from grpcio-tools) over every .proto file; raise RuntimeError when it fails."""
    out_dir.mkdir(parents=True, exist_ok=True)
    well_known = str(resources.files("grpc_tools") / "_proto")
    files = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "namesrv" / "v1").glob("*.proto"))
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed: " + " ".join(args))
    for package in (out_dir / "namesrv", out_dir / "namesrv" / "v1"):
        init = package / "__init__.py"
        if not init.exists():
            init.write_text('"""Generated from protos/ by scripts/gen_protos.py. Do not edit."""\n')


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "src")
