"""Where every benchmark leaves its results: <out>/<name>.json and <out>/<name>.md."""

from __future__ import annotations

import json
import os


def write_results(out: str, name: str, result: dict, markdown: str) -> None:
    """Writes the result as JSON and the table as Markdown under `out`, and prints the JSON."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(markdown)
    print(json.dumps(result, indent=2))
