"""The docs say what the code does, checked both ways where a name can be read off the code:

- docs/api.md: every route the OpenAPI schema serves is named with each of its methods on a line
  that names the route, every query parameter is named, and every `METHOD route` the doc writes
  exists with that method (test_api_docs_name_every_route.py checks the routes alone); every
  field of every schema it serves is named there or in docs/accounting.md;
- docs/api.md: every option of every `qm` command, and every `qm CMD --option` any doc writes
  exists for that command (test_cli_docs_name_every_command.py checks the commands alone);
- docs/operations.md: every environment variable the code reads has a row in a table with a
  `default` column, with the code's default when the code writes one as a literal, and every
  variable those tables list is read;
- every Prometheus family /metrics exports is named in docs/accounting.md's table, and every
  `quartermaster_…` name a doc writes is exported; the table gives each family its labels, and
  every selector a doc writes (an alert's `{state=~"down"}`, `sum without(state)`) uses labels
  its family has;
- every `scheduler_core.x`, `controlplane.x.Y` and `module.function` a doc writes names code
  that exists;
- every EventKind is in docs/api.md's table of event kinds, and the table lists no other;
- README.md opens with `make demo` and `make test`, and every `make TARGET` a doc writes exists;
- every `manage.py` command of the project is named, and every one a doc writes exists.

Each check reads names, never prose: rewording a sentence cannot fail it; a route, option,
variable, metric, label, function or event kind added, renamed or dropped on one side only does."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest
from drf_spectacular.generators import SchemaGenerator

from controlplane.choices import EventKind
from controlplane.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ALL_DOCS = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def _route(path: str) -> str:
    """A route as the docs write it: relative to /api/v1/, every parameter (`{id}`, `{pk}`,
    `{array_id}`, or an example id: `jobs/5/`, `nodes/17/drain/`) as {…}."""
    path = re.sub(r"\{[^}]+\}", "{…}", path.split("?")[0].removeprefix("/api/v1/"))
    return re.sub(r"(?<=/)(?:\d+|[0-9a-f]{8}-[0-9a-f-]{27}|<[a-z_]+>|ID|JOB)(?=/|$)", "{…}", path)


def _operations() -> dict[str, dict[str, list[str]]]:
    """{route: {METHOD: [query parameters]}} of every operation under /api/v1/."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    ops: dict[str, dict[str, list[str]]] = {}
    for path, item in schema["paths"].items():
        if path.startswith("/api/v1/"):
            for method, op in item.items():
                ops.setdefault(_route(path), {})[method.upper()] = [
                    p["name"] for p in op.get("parameters", []) if p.get("in") == "query"]
    assert len(ops) > 50 and sum(len(m) for m in ops.values()) > 90  # the whole API
    return ops


def test_api_docs_name_each_route_with_each_of_its_methods():
    doc = (DOCS / "api.md").read_text()
    lines = [re.sub(r"\{[^}]+\}", "{…}", line) for line in doc.splitlines()]
    unnamed = []
    for route, methods in sorted(_operations().items()):
        named = re.compile(r"(?<![\w/{}…-])" + re.escape(route) + r"(?![\w-])")
        said = {m for line in lines if named.search(line) for m in re.findall(r"\b(?:%s)\b" % "|".join(METHODS), line)}
        unnamed += [f"{method} {route}" for method in sorted(set(methods) - said)]
    assert unnamed == [], f"methods docs/api.md never names on a line that names their route: {unnamed}"


def test_api_docs_name_only_routes_and_methods_that_exist():
    ops = _operations()
    resources = {route.split("/")[0] for route in ops}
    wrong = []
    for doc in ALL_DOCS:
        # the table of error statuses names refused methods on purpose (405)
        text = "\n".join(line for line in doc.read_text().splitlines() if not line.startswith("| 405 |"))
        for method, path in re.findall(r"\b(%s) (/?[A-Za-z][\w\-/{}…<>.]*)" % "|".join(METHODS), text):
            route = _route(path).rstrip(".")
            if route.split("/")[0] not in resources or "/" not in route:
                continue  # prose ("POST submit"), the agent protocol, the pages
            # a placeholder ({id}, <action>) stands for any one segment
            pattern = re.compile("/".join("[^/]+" if part == "{…}" else re.escape(part) for part in route.split("/")))
            taking = {m for r, methods in ops.items() if pattern.fullmatch(r) for m in methods}
            if not taking:
                wrong.append(f"{doc.name}: {method} {path} (no such route)")
            elif method not in taking:
                wrong.append(f"{doc.name}: {method} {path} (the route takes {', '.join(sorted(taking))})")
    assert wrong == [], f"the docs name API operations that do not exist: {wrong}"


def test_api_docs_name_every_query_parameter():
    doc = (DOCS / "api.md").read_text()
    params = {(name, route) for route, methods in _operations().items()
              for names in methods.values() for name in names}
    assert len({name for name, _ in params}) > 40
    unnamed = sorted({f"{name} ({route})" for name, route in params
                      if not re.search(r"[`?&]" + re.escape(name) + r"\b", doc)})
    assert unnamed == [], f"query parameters docs/api.md never names: {unnamed}"


def test_api_docs_name_every_field_of_every_resource():
    """Every property of every schema the API serves (a job's `state_changed_at`, a quota's
    `lending_limit`, the utilization's `bucketSeconds`) is named in docs/api.md or, for the
    accounting's answers, docs/accounting.md: a field added to a serializer without a word
    fails here."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    text = (DOCS / "api.md").read_text() + (DOCS / "accounting.md").read_text()
    fields = {(name, prop) for name, component in schema["components"]["schemas"].items()
              for prop in component.get("properties", {})}
    assert len(fields) > 300 and ("Job", "state_changed_at") in fields  # the whole API
    unnamed = sorted(f"{name}.{prop}" for name, prop in fields
                     if not re.search(r"(?<!\w)" + re.escape(prop) + r"(?!\w)", text))
    assert unnamed == [], f"fields of the API no doc names: {unnamed}"


# ------------------------------------------------------------------------------------ the CLI


def _qm_options() -> dict[str, set[str]]:
    """{"qm submit": {"--name", "-n", …}, "qm notify add": {…}, …}"""
    found: dict[str, set[str]] = {}

    def walk(parser: argparse.ArgumentParser, command: str) -> None:
        options = found.setdefault(command, set())
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{command} {name}")
            else:
                options.update(action.option_strings)

    walk(build_parser(), "qm")
    return found


def test_cli_docs_name_every_option_of_every_qm_command():
    doc = (DOCS / "api.md").read_text()
    options = _qm_options()
    assert {"qm notify add", "qm maint edit"} <= set(options) and "--idempotency-key" in options["qm submit"]
    unnamed = sorted({f"{command} {option}" for command, opts in options.items() for option in opts
                      if option.startswith("--") and option != "--help"
                      and not re.search(re.escape(option) + r"(?![\w-])", doc)})
    assert unnamed == [], f"qm options docs/api.md never names: {unnamed}"


def test_cli_docs_show_only_options_the_command_takes():
    options = _qm_options()
    wrong = []
    for doc in ALL_DOCS:
        text = doc.read_text()
        # code spans and console lines: what a reader would type
        shown = re.findall(r"`([^`\n]+)`", text) + [line[2:] for line in text.splitlines() if line.startswith("$ ")]
        for snippet in shown:
            for m in re.finditer(r"(?<![\w-])qm ([a-z-]+)(?: ([a-z]+))?([^|;&#`]*)", snippet):
                command, rest = f"qm {m.group(1)}", m.group(3)
                if command not in options:
                    wrong.append(f"{doc.name}: {m.group(0).strip()} (no command {command})")
                    continue
                if m.group(2) and f"{command} {m.group(2)}" in options:
                    command = f"{command} {m.group(2)}"
                for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", rest.split(" -- ")[0]):
                    if option not in options[command] and option != "-h":
                        wrong.append(f"{doc.name}: {m.group(0).strip()} ({command} takes no {option})")
    assert wrong == [], f"the docs show qm options that do not exist: {wrong}"


# --------------------------------------------------------------------- environment variables

READ = re.compile(r"""(?:os\.environ\.get|os\.getenv|_env_bool|_env_float|_env_int|_env_rate)\(\s*["']([A-Z][A-Z0-9_]+)["']"""
                  r"""|os\.environ\[\s*["']([A-Z][A-Z0-9_]+)["']\s*\]""")
NOT_SETTINGS = {"DJANGO_SETTINGS_MODULE"}


def _variables_read() -> dict[str, set[str]]:
    """{variable: {its literal defaults}} of every environment variable the code reads."""
    found: dict[str, set[str]] = {}
    for path in [*sorted((ROOT / "controlplane").rglob("*.py")), *sorted((ROOT / "frontend").rglob("*.py"))]:
        if "migrations" in path.parts:
            continue
        source = path.read_text()
        for m in READ.finditer(source):
            found.setdefault(m.group(1) or m.group(2), set())
        for node in ast.walk(ast.parse(source)):
            # os.environ.get(NAME, default), or settings' _env_float/_env_int/_env_rate(NAME, default)
            if (isinstance(node, ast.Call) and len(node.args) == 2 and isinstance(node.args[0], ast.Constant)
                    and (isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                         and ast.unparse(node.func.value) == "os.environ"
                         or isinstance(node.func, ast.Name) and node.func.id in {"_env_float", "_env_int", "_env_rate"})):
                default = _literal(node.args[1])
                if default:
                    found.setdefault(node.args[0].value, set()).add(default)
    for name in NOT_SETTINGS:
        found.pop(name, None)
    return found


def _literal(node: ast.expr) -> str | None:
    """A default written as a string, or as str() of arithmetic on numbers (`str(7 * 86400)`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (isinstance(node, ast.Call) and ast.unparse(node.func) == "str" and len(node.args) == 1
            and all(isinstance(n, (ast.Constant, ast.BinOp, ast.operator)) for n in ast.walk(node.args[0]))):
        return str(eval(compile(ast.Expression(node.args[0]), "<default>", "eval")))  # numbers only
    return None


def _documented_variables() -> dict[str, str]:
    """{variable: its default cell} from every table of docs/operations.md with a `default` column."""
    rows: dict[str, str] = {}
    column = None
    for line in (DOCS / "operations.md").read_text().splitlines():
        if not line.startswith("|"):
            column = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if column is None:
            column = cells.index("default") if cells[0] == "variable" and "default" in cells else -1
        elif column >= 0 and not set(cells[0]) <= set("-: "):
            for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]):
                rows[name] = rows.get(name, "") + " " + cells[column]
    return rows


def _says(cell: str, default: str) -> bool:
    if re.search(r"(?<![\w.])" + re.escape(default) + r"(?![\w])", cell):
        return True
    try:
        value = float(default)
    except ValueError:
        return False
    return any(float(n.replace(",", "")) == value for n in re.findall(r"\d[\d,]*(?:\.\d+)?", cell))


def test_operations_lists_every_environment_variable_with_its_default():
    read, documented = _variables_read(), _documented_variables()
    assert {"DATABASE_URL", "QM_CYCLE_INTERVAL_S", "QM_WEBHOOK_TIMEOUT_S", "QM_SERVER", "QM_URL"} <= set(read)
    assert len(documented) > 40
    assert sorted(set(read) - set(documented)) == [], "variables the code reads that no table of docs/operations.md lists"
    assert sorted(set(documented) - set(read)) == [], "variables docs/operations.md lists that no code reads"
    wrong = sorted(f"{name}: the code's default is {default!r}, the doc says {documented[name].strip()!r}"
                   for name, defaults in read.items() for default in defaults if not _says(documented[name], default))
    assert wrong == [], f"defaults docs/operations.md gets wrong: {wrong}"


# ------------------------------------------------------------------------- metrics and events


def _metric_families() -> set[str]:
    """The family names /metrics exports, as scraped: a counter's with its `_total`."""
    source = (ROOT / "controlplane" / "metrics.py").read_text()
    prefix = re.search(r'^PREFIX = "(\w+)"', source, re.M).group(1)
    calls = re.findall(r'(Counter|Gauge|Histogram)MetricFamily\(\s*f"\{PREFIX\}_(\w+)"', source)
    assert len(calls) == source.count("MetricFamily(") > 25  # every family read, none missed by the pattern
    return {f"{prefix}_{name}" + ("_total" if kind == "Counter" else "") for kind, name in calls}


def test_every_metric_family_is_documented_and_every_documented_one_exported():
    families = _metric_families()
    table = (DOCS / "accounting.md").read_text().split("## `/metrics`", 1)[1].split("\n## ", 1)[0]
    unlisted = sorted(f for f in families if f"`{f}`" not in table)
    assert unlisted == [], f"families /metrics exports that docs/accounting.md's /metrics table does not list: {unlisted}"
    samples = families | {f + suffix for f in families for suffix in ("_bucket", "_count", "_sum")}
    named = {(doc.name, name) for doc in ALL_DOCS
             for name in re.findall(r"(?<![\w/])quartermaster_[a-z0-9_]*[a-z0-9]", doc.read_text())}
    unknown = sorted(f"{doc}: {name}" for doc, name in named if name not in samples)
    assert unknown == [], f"metric names the docs write that /metrics does not export: {unknown}"


def _metric_labels() -> dict[str, set[str]]:
    """{family as scraped: its label names} of every family the collector yields, read off the
    families themselves (an empty database still yields each, with its label names)."""
    from controlplane.metrics import QuartermasterCollector

    labels = {}
    for family in QuartermasterCollector().collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        labels[name] = set(family._labelnames)  # prometheus_client keeps them for families without samples
    assert labels.keys() == _metric_families()  # every family, as the source names them
    return labels


def _labels_cell(cell: str, count: int) -> list[set[str]]:
    """The label names a row of docs/accounting.md's /metrics table gives each of its `count`
    families: "team, gpu_type" (all of them), "—, —, pool" (one each), "—" (none); what is in
    parentheses is prose."""
    while re.search(r"\([^()]*\)", cell):
        cell = re.sub(r"\([^()]*\)", "", cell)
    names = [n.strip() for n in cell.split(",") if n.strip()]
    if "—" in names and len(names) == count:
        return [set() if n == "—" else {n} for n in names]
    return [{n for n in names if n != "—"}] * count


@pytest.mark.django_db
def test_metric_labels_in_the_docs_are_the_ones_exported():
    """docs/accounting.md's /metrics table gives each family its labels exactly, and every
    selector a doc writes (an alert's `quartermaster_nodes{state=~"down"}`, a `sum without(state)`)
    uses labels its family has: an alert on a label no series carries matches nothing and never
    fires."""
    exported = _metric_labels()
    table = (DOCS / "accounting.md").read_text().split("## `/metrics`", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for row in table.splitlines():
        cells = row.split("|")
        if len(cells) < 5:
            continue  # prose between the rows
        families = re.findall(r"`(quartermaster_\w+)`", cells[1])
        for family, labels in zip(families, _labels_cell(cells[3], len(families)), strict=True):
            documented[family] = labels
    assert documented.keys() == exported.keys()
    wrong = sorted(f"{f}: the table says {sorted(documented[f])}, /metrics has {sorted(exported[f])}"
                   for f in exported if documented[f] != exported[f])
    assert wrong == [], f"labels docs/accounting.md's /metrics table gets wrong: {wrong}"
    used = []
    for doc in ALL_DOCS:
        text = doc.read_text().replace("\\|", "|")
        for family, selector in re.findall(r"(quartermaster_\w+)\{([^}]*)\}", text):
            used += [(doc.name, family, label) for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector)]
        for labels, family in re.findall(r"(?:by|without)\s*\(([\w ,]*)\)\s*\(\s*(quartermaster_\w+)", text):
            used += [(doc.name, family, label.strip()) for label in labels.split(",")]
    assert len(used) >= 4  # the alerts' selectors, not an empty scan
    unknown = sorted(f"{doc}: {family}{{{label}}}" for doc, family, label in used
                     if family in exported and label not in exported[family])
    assert unknown == [], f"selectors the docs write on labels their family does not have: {unknown}"


def test_every_event_kind_is_in_the_table_of_event_kinds_and_only_those():
    doc = (DOCS / "api.md").read_text()
    table = doc.split("**Event kinds**", 1)[1].split("\n\n", 2)[1]
    listed = {kind for row in table.splitlines()[2:] for kind in re.findall(r"`([a-z]+\.[a-z_]+)`", row.split("|")[1])}
    assert listed, "docs/api.md has no table of event kinds"
    kinds = {str(kind) for kind in EventKind}
    assert sorted(kinds - listed) == [], "event kinds docs/api.md's table does not list"
    assert sorted(listed - kinds) == [], "event kinds docs/api.md's table lists that EventKind has not"


# ------------------------------------------------------------------------------ code the docs name


_ABSENT = object()


def _project_modules() -> dict[str, list[str]]:
    """{a module's own name: the dotted names of the project's modules so named}."""
    modules: dict[str, list[str]] = {}
    for package in ("controlplane", "scheduler_core", "frontend"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts and path.name != "__init__.py":
                dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                modules.setdefault(path.stem, []).append(dotted)
    return modules


def _has(module_name: str, attribute: str) -> bool:
    """The module has the attribute, or a class of it has (a method: `quota.check`)."""
    import importlib
    import inspect

    module = importlib.import_module(module_name)
    if hasattr(module, attribute):
        return True
    return any(hasattr(cls, attribute) for _, cls in inspect.getmembers(module, inspect.isclass)
               if cls.__module__ == module_name)


def test_docs_name_only_functions_classes_and_modules_that_exist():
    """Every `scheduler_core.eligibility`, `controlplane.beat.LoopScheduler` a doc writes, and
    every `job_costs.run_costs`, `services/transitions.cancel_job` (a project module's own name,
    then one of its functions, classes, constants or a method of its classes) names code that
    exists. Names that are not Python but read alike pass when the code writes them as a string:
    a log event (`notifications.address_refused`), a task (`qm.tick`), a JSON path
    (`loop.last_cycle_age_s`). A function renamed or moved without its doc fails here
    (test_docs_name_real_files_and_tests.py checks the files)."""
    import importlib

    modules = _project_modules()
    source = "\n".join(path.read_text() for package in ("controlplane", "scheduler_core", "frontend")
                       for path in (ROOT / package).rglob("*.py"))
    kinds = {str(kind) for kind in EventKind}
    missing, checked = [], 0
    for doc in [*ALL_DOCS, ROOT / "DEVELOPERS.md"]:
        text = doc.read_text()
        for dotted in set(re.findall(r"(?<![\w./-])((?:scheduler_core|controlplane|frontend)(?:\.[A-Za-z_]\w*)+)", text)):
            parts, checked = dotted.split("."), checked + 1
            for i in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    continue
                for part in parts[i:]:
                    obj = getattr(obj, part, _ABSENT)
                if obj is _ABSENT:
                    missing.append(f"{doc.name}: {dotted}")
                break
        for module, attribute in set(re.findall(r"`(?:[\w/]+/)?([a-z_]+)\.([A-Za-z_]\w*)(?:\(\))?`", text)):
            if module not in modules or f"{module}.{attribute}" in kinds or (
                    attribute in ("py", "md", "js", "css", "html", "csv", "json", "yml", "yaml", "toml", "sh", "txt")):
                continue
            checked += 1
            if any(_has(name, attribute) for name in modules[module]):
                continue
            if f'"{module}.{attribute}"' in source or (f'"{module}"' in source and f'"{attribute}"' in source):
                continue
            missing.append(f"{doc.name}: {module}.{attribute} ({', '.join(modules[module])})")
    assert checked > 100  # the docs' names, not an empty scan
    assert sorted(missing) == [], f"the docs name code that does not exist: {sorted(missing)}"


# ------------------------------------------------------------------------------ make, README


def test_readme_opens_with_make_demo_and_make_test_and_docs_name_real_make_targets():
    readme = (ROOT / "README.md").read_text()
    assert re.match(r"# [^\n]+\n+```sh\nmake demo\nmake test\n```\n", readme), "README.md opens otherwise"
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    assert {"demo", "test"} <= targets
    named = set()
    for doc in [*ALL_DOCS, ROOT / "DEVELOPERS.md"]:
        text = doc.read_text()
        fenced = "\n".join(re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S)).splitlines()
        for snippet in re.findall(r"`([^`\n]+)`", text) + fenced:
            named.update((doc.name, target) for target in re.findall(r"^\$? ?make ([a-z][\w-]*)", snippet.strip()))
    assert ("README.md", "demo") in named
    assert sorted(f"{doc}: make {t}" for doc, t in named if t not in targets) == []


def test_docs_name_every_manage_py_command_of_the_project_and_only_commands_that_exist():
    from django.core.management import get_commands

    commands = get_commands()  # {name: app}, Django's own included
    ours = {name for name, app in commands.items() if app == "controlplane"}
    assert {"demo", "seed_demo"} <= ours
    text = "\n".join(doc.read_text() for doc in [*ALL_DOCS, ROOT / "DEVELOPERS.md"])
    named = set(re.findall(r"manage\.py ([a-z][a-z_]*)", text))
    assert sorted(named - set(commands)) == [], "manage.py commands the docs write that do not exist"
    assert sorted(ours - named) == [], "the project's manage.py commands no doc names"


def test_operations_lists_every_qm_agent_option():
    source = (ROOT / "controlplane" / "agent" / "main.py").read_text()  # parse_args builds its parser inline
    options = set(re.findall(r'add_argument\(\s*"(--[a-z][\w-]*)"', source))
    assert {"--server", "--simulate", "--no-output"} <= options
    doc = (DOCS / "operations.md").read_text()
    assert sorted(o for o in options if not re.search(re.escape(o) + r"(?![\w-])", doc)) == [], \
        "qm-agent options docs/operations.md never names"


# ------------------------------------------------------------------------------ dependencies


def test_every_dependency_says_why_in_docs_dependencies_and_only_those():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=!~\[ ;]", spec)[0].lower()
                for spec in [*project["dependencies"], *project["optional-dependencies"]["test"]]}
    listed = set()
    for line in (DOCS / "dependencies.md").read_text().splitlines():
        cells = line.split("|")
        if line.startswith("| ") and cells[1].strip() != "package" and len(cells) > 3 and cells[2].strip():
            listed.update(re.split(r"[\[ (]", name.strip())[0].lower() for name in cells[1].split(","))
    assert {"django", "pytest"} <= declared
    assert sorted(declared - listed) == [], "dependencies docs/dependencies.md does not justify"
    assert sorted(listed - declared) == [], "docs/dependencies.md justifies packages pyproject.toml no longer has"


def _served_outside_the_schema() -> list[str]:
    """Every route the URL conf serves that the OpenAPI schema does not describe: the node
    agents' protocol, the pages and their JSON, /healthz, /metrics, the schema's viewers."""
    from django.urls import URLPattern, URLResolver, get_resolver

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern)

    routes = []
    for route in walk(get_resolver().url_patterns):
        if route.startswith(("admin/", "api/v1/^")) or "^" in route or "format>" in route or route == "favicon.ico":
            continue  # the admin UI; the routers' viewsets and the catch-all (the schema's)
        if route.startswith("api/v1/") and not route.startswith("api/v1/agent/"):
            continue  # the schema describes these
        routes.append("/" + re.sub(r"<(?:\w+:)?\w+>", "{…}", route))
    return routes


def test_docs_name_every_route_served_outside_the_api_schema():
    routes = _served_outside_the_schema()
    assert {"/api/v1/agent/register", "/history/", "/healthz", "/ui/what-if.json"} <= set(routes)
    text = "\n".join(doc.read_text() for doc in ALL_DOCS)
    # a parameter as the docs write it: {id}, <name>, NAME, or an example (`/jobs/412/`, `/nodes/h100-03/`)
    text = re.sub(r"\{[^}\n]+\}|<[a-z_]+>", "{…}", text)
    unnamed = []
    for route in routes:
        parts = [re.escape(part) for part in route.split("{…}")]
        pattern = r"(?:\{…\}|[\w.-]+)".join(parts)
        variants = [pattern, pattern.removeprefix(re.escape("/api/v1/"))]
        if not any(re.search(r"(?<![\w/-])" + v + r"(?![\w-])", text) for v in variants):
            unnamed.append(route)
    assert unnamed == [], f"routes no doc names: {unnamed}"


def test_architecture_names_every_model():
    from django.apps import apps

    models = {model.__name__ for model in apps.get_app_config("controlplane").get_models()}
    assert {"Job", "Allocation", "SchedulerLease"} <= models
    doc = (DOCS / "architecture.md").read_text()
    assert sorted(m for m in models if not re.search(r"\b" + m + r"\b", doc)) == [], \
        "models docs/architecture.md's table of models does not name"
