"""`gpuplan schema`: the catalogue's JSON Schema, for editors that validate YAML."""

from __future__ import annotations

import argparse
import json

from seats.model import Catalogue

HELP = "print the catalogue's JSON Schema"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""


def run(args: argparse.Namespace) -> int:
    """Print the schema and exit 0."""
    schema = Catalogue.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpuplan catalogue"
    print(json.dumps(schema, indent=2))
    return 0
