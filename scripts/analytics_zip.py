"""``make analytics-zip``: the Spark jobs and the snapshot schemas as one zip for ``spark-submit
--py-files`` (the driver imports ``namesrv_analytics`` and ``namesrv_grpc.snapshot_schema`` from it; the
executors need no project code)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = [  # (file, its root: the path in the zip is relative to it)
    *((path, ROOT / "analytics") for path in sorted((ROOT / "analytics" / "namesrv_analytics").glob("*.py"))),
    (ROOT / "src" / "namesrv_grpc" / "__init__.py", ROOT / "src"),
    (ROOT / "src" / "namesrv_grpc" / "snapshot_schema.py", ROOT / "src"),
]


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else "build/analytics.zip")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, root in FILES:
            archive.write(path, path.relative_to(root).as_posix())
    print(f"{out}: {len(FILES)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
