"""OpenAPI 3.1 documents built from the code's own pydantic models: each daemon lists its routes once (path,
query model, answers by status), and the document, the docs page and the contract test all read that list.

Pure: no web framework, no daemon; ``exporter.agent`` and ``exporter.aggregator`` each import it for their
own routes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

REF = "#/components/schemas/{model}"
JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Answer:
    """One status a route may answer: a JSON body of ``model`` (a list of them with ``many``), or another media
    type described in words (``/metrics``' text exposition, CSV, HTML)."""

    description: str
    model: type[Any] | None = None  # a pydantic model or pydantic dataclass
    many: bool = False
    media: str = JSON
    headers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Route:
    """A GET route: its query parameters (the fields of ``query``) and every answer it gives."""

    path: str
    summary: str
    answers: dict[int, Answer]
    query: type[BaseModel] | None = None
    open: bool = False  # served without a bearer token even when authentication is on
    tags: tuple[str, ...] = field(default=())


def _parameters(model: type[BaseModel] | None) -> list[dict[str, Any]]:
    if model is None:
        return []
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    return [{"name": name, "in": "query", "required": name in required, "schema": prop,
             **({"description": prop["description"]} if "description" in prop else {})}
            for name, prop in schema["properties"].items()]


def _content(a: Answer) -> dict[str, Any]:
    if a.model is None:
        return {a.media: {"schema": {"type": "string"}}}
    ref = {"$ref": REF.format(model=a.model.__name__)}
    return {a.media: {"schema": {"type": "array", "items": ref} if a.many else ref}}


def document(*, title: str, version: str, description: str, routes: list[Route],
             bearer: Literal["none", "required", "optional"]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes``. ``bearer``: whether routes that are not ``open`` need a token
    (``required``), may be sent one (``optional``: the agent's usage token when it is configured), or not."""
    models = {a.model for r in routes for a in r.answers.values() if a.model is not None}
    _keys, defs = models_json_schema([(m, "serialization") for m in sorted(models, key=lambda m: m.__name__)],
                                     ref_template=REF)
    paths: dict[str, Any] = {}
    for r in routes:
        op: dict[str, Any] = {
            "summary": r.summary, "operationId": "get_" + (r.path.strip("/").replace("/", "_") or "root"),
            "parameters": _parameters(r.query),
            "responses": {str(status): {"description": a.description,
                                        **({"content": _content(a)}),
                                        **({"headers": {h: {"schema": {"type": "string"}} for h in a.headers}}
                                           if a.headers else {})}
                          for status, a in sorted(r.answers.items())}}
        if r.tags:
            op["tags"] = list(r.tags)
        if bearer != "none" and not r.open:
            op["security"] = [{"bearer": []}] if bearer == "required" else [{"bearer": []}, {}]
        paths[r.path] = {"get": op}
    doc: dict[str, Any] = {"openapi": "3.1.0", "info": {"title": title, "version": version, "description": description},
                           "paths": paths, "components": {"schemas": defs.get("$defs", {})}}
    if bearer != "none":
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return doc
