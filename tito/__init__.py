"""tito: the TinyTorch course command line (export, test, release, benchmark)."""
import sys

# nbformat (which most of tito's processes import: the CLI, each grading judge and its page renderer, the notebook
# runners) imports jsonschema, and jsonschema imports rfc3987_syntax where it is installed (jupyter-events asks for
# it), which builds a Lark grammar as it is imported: 1.3 of the 1.5 CPU-s `import nbformat` takes. Only
# jsonschema's "iri" format checks use it and nothing tito runs asks for them (without the package jsonschema
# leaves that format unchecked, as it does for any format it has no checker for), so tito's processes go without.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # an import of it raises ImportError
