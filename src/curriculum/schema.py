"""JSON Schemas of the source formats, for editors' YAML language servers."""

from __future__ import annotations

import json
from pathlib import Path

from curriculum.models import SOURCE_MODELS


def export_schemas(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in sorted(SOURCE_MODELS.items()):
        schema = model.model_json_schema()
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        path = out / f"{name}.schema.json"
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written
