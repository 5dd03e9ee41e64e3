"""The package's version: the ground floor of the layers, importing nothing.

May import: nothing. Imported by: every layer that names the product's version (the broker's and
the client's ``connection.start``/``start-ok`` properties, the management API's overview and
definitions, the CLI's ``--version``) and the package root, which re-exports it.
Kept in step with ``pyproject.toml``'s ``[project] version``.
"""

__version__ = "0.1.0"
