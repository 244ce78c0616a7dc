"""`gpuplan schema`: the catalogue's JSON Schema, for editors that validate YAML."""

from __future__ import annotations

import argparse
import json

from seats.model import Catalogue

HELP = "print the catalogue's JSON Schema"
DESCRIPTION = """\
Print the JSON Schema (draft 2020-12) of the catalogue YAML on stdout: every key,
its type and default, byte sizes as an int or a string like "10740 MiB", and
unknown keys refused, as the loader refuses them. Editors validate as you type
with it; the loader's own rules (names unique, cards exist, reserves fit) are
checked only by gpuplan itself."""
EPILOG = """\
example:
  gpuplan schema > catalogue.schema.json
  # then, first line of the catalogue, for editors using yaml-language-server:
  # yaml-language-server: $schema=catalogue.schema.json"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options; a hand-laid description and example."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = DESCRIPTION
    parser.epilog = EPILOG


def run(args: argparse.Namespace) -> int:
    """Print the schema and exit 0."""
    schema = Catalogue.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpuplan catalogue"
    print(json.dumps(schema, indent=2))
    return 0
