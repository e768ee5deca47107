"""Keep the project's conf/ on Hydra's search path when ``--config-path`` replaces it.

With ``--config-path DIR`` Hydra looks for the primary config (``decode.yaml``) and every
group only in DIR. Appending conf/ after DIR lets DIR hold just the user's own files
(``model/my_model.yaml``, or its own ``decode.yaml``, which then wins over conf/'s).
"""

from __future__ import annotations

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")


class GxConfSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        paths = {e.path.removeprefix("file://").rstrip("/") for e in search_path.get_path()}
        main = next((e for e in search_path.get_path() if e.provider == "main"), None)
        # only for a gx pipeline's search path: its primary dir is conf/ or was given by --config-path
        if CONF_DIR not in paths and main is not None and not main.path.startswith("pkg://"):
            search_path.append(provider="gxnet", path=f"file://{CONF_DIR}")
