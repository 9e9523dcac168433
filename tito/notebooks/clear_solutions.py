"""nbgrader's ClearSolutions with named stubs (tito.notebooks.named_stubs), registered by tito's generated
nbgrader_config.py for `generate_assignment`."""
from __future__ import annotations

from nbgrader.preprocessors import ClearSolutions

from tito.notebooks.named_stubs import replace_regions


class NamedClearSolutions(ClearSolutions):
    """ClearSolutions whose code stub names the enclosing function (see tito.notebooks.named_stubs)."""

    def _replace_solution_region(self, cell, language):  # noqa: ANN001 - nbgrader's signature
        if cell.cell_type != "code" or language != "python":
            return super()._replace_solution_region(cell, language)
        meta = cell.metadata.get("nbgrader", {})
        try:
            new, count = replace_regions(cell.source, meta.get("grade_id", "this cell"))
        except ValueError as e:
            self.log.error("%s. Cell contents are:\n%s", e, cell.source)
            raise RuntimeError(str(e)) from e
        cell.source = new
        return count > 0
