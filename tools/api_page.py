"""``docs/reference/http-api.md``: both daemons' OpenAPI documents (``exporter.aggregator.web.api_spec``,
``exporter.agent.api_spec``) rendered as tables: each route's parameters and answers, then each body's fields.
Written by ``tools/gen_docs.py`` with the other reference pages."""

from __future__ import annotations

import json
from typing import Any

INTRO = """# HTTP API reference

Both daemons' routes as their OpenAPI 3.1 documents describe them. The documents are built from the models the
code answers with (one list of routes per daemon, which the servers register and a test holds equal), and a
contract test (schemathesis, in the test suite and so in CI) sends generated requests to a live aggregator,
with authentication on and off, and to a live agent, and checks that no answer is a 5xx and every answer is one
the document lists.

* **Aggregator**: `GET /api/v1/openapi.json` serves its document, without a token even when `auth` is
  `kubernetes` (it holds routes and shapes, no data). With `auth: kubernetes` every route but `/healthz`,
  `/readyz` and the document needs `Authorization: Bearer <token>` and may answer 401, 403 and 503 (the API
  server could not review the token now; `Retry-After`).
* **Agent**: serves no document (one route less on every node, and the schema is never built inside the
  agent's memory budget); it is this page's second half, and `python -c "import json; from
  exporter.agent.api_spec import openapi; print(json.dumps(openapi()))"` prints it. `/v1/usage` needs the
  bearer token when `usage_token_file` is set.

Amounts in report rows are exact decimals written as JSON numbers (up to 9 decimal places): parse them as
decimals, not binary floats.
"""


def _type(node: dict[str, Any]) -> str:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in node:
        return " or ".join(_type(n) for n in node["anyOf"])
    if "enum" in node:
        return " or ".join(f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    if node.get("type") == "array":
        return f"list of {_type(node.get('items', {}))}"
    return str(node.get("type", "any"))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _body(content: dict[str, Any]) -> str:
    media, spec = next(iter(content.items()))
    schema = spec.get("schema", {})
    return f"`{media}`" if schema.get("type") == "string" and "$ref" not in schema else f"{_type(schema)}"


def render_document(doc: dict[str, Any], *, heading: str) -> str:
    """One daemon's routes and schemas as markdown."""
    lines = [f"## {heading}", ""]
    for path, item in doc["paths"].items():
        op = item["get"]
        auth = "bearer token" if op.get("security") == [{"bearer": []}] else \
            "bearer token when configured" if op.get("security") else "none"
        lines += [f"### `GET {path}`", "", f"{op['summary'][0].upper()}{op['summary'][1:]}. Authentication: {auth}.",
                  ""]
        if op["parameters"]:
            lines += ["| Parameter | Type | Required | Meaning |", "|---|---|---|---|"]
            lines += [f"| `{p['name']}` | {_cell(_type(p['schema']))} | {'yes' if p['required'] else 'no'} | "
                      f"{_cell(p.get('description', ''))} |" for p in op["parameters"]]
            lines.append("")
        lines += ["| Status | Body | When |", "|---|---|---|"]
        lines += [f"| {status} | {_cell(_body(r['content']))} | {_cell(r['description'])} |"
                  for status, r in op["responses"].items()]
        lines.append("")
    lines += [f"### {heading}: bodies", ""]
    for name, schema in doc["components"]["schemas"].items():
        lines += [f"#### {name}", "", _cell(schema.get("description", "")), ""]
        props = schema.get("properties")
        if not props:
            lines += [f"{_cell(_type({k: v for k, v in schema.items() if k != 'description'}))}", ""]
            continue
        required = set(schema.get("required", []))
        lines += ["| Field | Type | Always present |", "|---|---|---|"]
        lines += [f"| `{field}` | {_cell(_type(prop))} | {'yes' if field in required else 'no'} |"
                  for field, prop in props.items()]
        if schema.get("additionalProperties") is not False and "ReportRow" in name:
            lines += ["", "Further columns (CO2e, repricing) may follow."]
        lines.append("")
    return "\n".join(lines)


def api_page_text() -> str:
    """The page, from both documents as the code builds them now (version left out: it changes every release)."""
    from exporter.agent.api_spec import openapi as agent_doc
    from exporter.aggregator.web.api_spec import openapi as aggregator_doc

    agg = json.loads(json.dumps(aggregator_doc(auth=True)))
    return "\n".join([INTRO, render_document(agg, heading="Aggregator"),
                      render_document(agent_doc(), heading="Agent")]).rstrip() + "\n"
