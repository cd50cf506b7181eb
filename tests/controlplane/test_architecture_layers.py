"""docs/architecture.md's *Layers inside the control plane* says which way imports point; these
read the imports off the code (every import statement, those inside functions too, but not
those under `if TYPE_CHECKING:`, which never run) and hold the doc to them:

- the models import no task, and of the services only modules that import no model, each named
  in the doc;
- every import circle left among the control plane's modules (a strongly connected group of
  the import graph) is named, module by module, in the doc's paragraph on import circles."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
PACKAGES = ("controlplane", "frontend")


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = path
    return modules


def _runtime_imports(tree: ast.AST) -> list[str]:
    """Every dotted name an import statement may bind at run time (`from a import b` gives `a`
    and `a.b`: b may be a module), skipping `if TYPE_CHECKING:` blocks."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {imported for imported in _runtime_imports(ast.parse(path.read_text()))
                   if imported in modules and imported != name and imported not in PACKAGES}
            for name, path in modules.items()}


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                connect(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph):
            if module not in index:
                connect(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _doc_path(module: str) -> str:
    """How the doc writes a service module: `services/cohorts.py`."""
    return module.removeprefix("controlplane.").replace(".", "/") + ".py"


def test_models_import_no_task_and_only_services_that_import_no_model() -> None:
    graph = _graph()
    models = {name for name in graph if name == "controlplane.models" or name.startswith("controlplane.models.")}
    assert len(models) > 10  # the package's modules, not an empty scan
    imported = set().union(*(graph[name] for name in models)) - models
    tasks = sorted(name for name in imported if name.split(".")[-1].startswith("tasks"))
    assert tasks == [], f"the models import tasks: {tasks}"
    services = sorted(name for name in imported if name.startswith("controlplane.services"))
    assert services, "the models import no service: docs/architecture.md names three that they do"

    def reaches_a_model(module: str, seen: set[str]) -> bool:
        if module in models:
            return True
        seen.add(module)
        return any(reaches_a_model(m, seen) for m in graph[module] if m not in seen)

    assert [s for s in services if reaches_a_model(s, set())] == [], "a service the models import imports a model"
    unnamed = [s for s in services if f"`{_doc_path(s)}`" not in ARCHITECTURE]
    assert unnamed == [], f"services the models import that docs/architecture.md does not name: {unnamed}"


def test_architecture_names_every_import_circle_left() -> None:
    circles = _circles(_graph())
    paragraph = next((" ".join(p.split()) for p in ARCHITECTURE.split("\n\n") if "import circle" in " ".join(p.split())), "")
    assert paragraph, "docs/architecture.md says nothing of import circles"
    unnamed = sorted(_doc_path(m) for circle in circles for m in circle if f"`{_doc_path(m)}`" not in paragraph)
    assert unnamed == [], f"modules in an import circle docs/architecture.md's paragraph does not name: {unnamed}"
    named = set(re.findall(r"`(services/[\w/]+\.py)`", paragraph))
    in_circles = {_doc_path(m) for circle in circles for m in circle}
    assert sorted(named - in_circles) == [], \
        "docs/architecture.md's paragraph on import circles names a module in none"


def test_architecture_names_every_api_module_outside_the_views_and_serializers_packages_that_serves() -> None:
    """The API's views live in `api/views/` and its serializers in `api/serializers/`, a module per
    resource, except the resources whose one module holds both: the doc names each of those."""
    serving = []
    for path in sorted((ROOT / "controlplane" / "api").glob("*.py")):
        tree = ast.parse(path.read_text())
        bases = {ast.unparse(base) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for base in node.bases}
        if any(re.search(r"(APIView|ViewSet|GenericAPIView|Serializer)$", base) for base in bases):
            serving.append(f"api/{path.name}")
    assert "api/agent.py" in serving
    assert sorted(m for m in serving if f"`{m}`" not in ARCHITECTURE) == [], \
        "API modules serving resources outside api/views/ that docs/architecture.md does not name"
