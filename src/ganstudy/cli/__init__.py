"""``ganstudy``'s command line: one module per stage, each with its commands' parsers beside their handlers
(ganstudy.cli.main builds the parser from them)."""

from ganstudy.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
