"""``make analytics-zip``: the Spark jobs and the snapshot schemas as one zip for ``spark-submit
--py-files`` (the driver imports ``analytics`` and ``namesrv_grpc.snapshot_schema`` from it; the
executors need no project code)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
FILES = [
    *sorted((SRC / "analytics").glob("*.py")),
    SRC / "namesrv_grpc" / "__init__.py",
    SRC / "namesrv_grpc" / "snapshot_schema.py",
]


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else "build/analytics.zip")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in FILES:
            archive.write(path, path.relative_to(SRC).as_posix())
    print(f"{out}: {len(FILES)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
