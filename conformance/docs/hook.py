"""MkDocs hook (mkdocs.yml `hooks`): adds the generated pages (conformance.docs.pages) to every build, so the site's
references are always those of the code being built; a requirement or profile field without text fails the build."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from conformance.docs.pages import generated


def on_files(files: Files, config: Any) -> Files:
    for path, text in generated().items():
        files.append(File.generated(config, path, content=text))
    return files
