"""The house's rules, held by CI: rooms (the folders of ``src/seakr``) import downward only, no module imports itself
back through others (function-local imports count: a local import hides a cycle, it does not cure it), no file over
600 lines or function over 60, and a function imports locally only what is optional or heavy to load."""

import ast
import graphlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "seakr"

#: The rooms from the ground floor up: a room imports only rooms on a lower floor. The package's own
#: ``seakr/__init__.py`` (its public names, loaded lazily) stands above them all.
FLOORS = (("locks", "progress"), ("common",), ("uncertainty", "models", "search", "prompts"), ("probes",),
          ("methods",), ("integrations", "eval"), ("serve",), ("cli",))
#: What a function may import locally: packages that are optional (an extra, a platform's, a Python version's) or
#: slow to import for the commands that never use them.
LOCAL_OK = {"torch", "transformers", "sklearn", "scipy", "matplotlib", "pyarrow", "pandas", "huggingface_hub", "rich",
            "elasticsearch", "opensearchpy", "fastapi", "starlette", "uvicorn", "ray", "gguf", "safetensors", "jinja2",
            "tantivy", "zstandard", "compression", "bz2", "lzma", "fcntl", "ctypes", "accelerate", "psutil"}
#: The seams where seakr's own modules load lazily, each for a heavy dependency behind it.
LOCAL_SEAMS = {("__init__.py", "__getattr__"),  # `import seakr` stays light: its names load on first use
               ("models/__init__.py", "load_model"),  # the Hugging Face backend imports torch
               ("cli/commands.py", "cmd_serve")}  # the service needs the serve extra (FastAPI)


def _module(p: Path) -> str:
    parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(SRC.rglob("*.py"))}


def _imports(path: Path):
    """(node, the seakr modules it imports) for every import statement of ``path``, function-local ones too."""
    mod = _module(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        yield node, [n for n in names if n in MODULES and n != mod]


def _room(mod: str) -> str:
    return mod.split(".")[1] if "." in mod else ""


def _floor(room: str) -> int:
    return next(i for i, rooms in enumerate(FLOORS) if room in rooms)


def test_every_room_stands_on_a_floor():
    rooms = {_room(m) for m in MODULES} - {""}
    assert rooms == {r for floor in FLOORS for r in floor}, "a new folder needs its floor in FLOORS"


def test_no_module_imports_itself_back():
    graph = {m: set() for m in MODULES}
    for m, p in MODULES.items():
        for _, targets in _imports(p):
            graph[m].update(targets)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail("import cycle: " + " -> ".join(e.args[1]))


def test_rooms_import_downward_only():
    up = []
    for m, p in MODULES.items():
        if _room(m) == "":
            continue  # the package's public names
        for node, targets in _imports(p):
            up += [f"{p.relative_to(SRC)}:{node.lineno} imports {t}" for t in targets
                   if _room(t) not in ("", _room(m)) and _floor(_room(t)) >= _floor(_room(m))]
    assert not up, "imports up a floor (or across one):\n" + "\n".join(up)


def test_files_and_functions_stay_small():
    big = []
    for p in MODULES.values():
        text = p.read_text(encoding="utf-8")
        if (n := len(text.splitlines())) > 600:
            big.append(f"{p.relative_to(SRC)}: {n} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                big.append(f"{p.relative_to(SRC)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} "
                           "lines")
    assert not big, "split these:\n" + "\n".join(big)


def test_a_function_imports_locally_only_what_is_optional_or_heavy():
    found = []
    for p in MODULES.values():
        where = str(p.relative_to(SRC))
        for fn in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.level:
                    ok = (where, fn.name) in LOCAL_SEAMS
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                    ok = all(n.split(".")[0] in LOCAL_OK for n in names)
                else:
                    continue
                if not ok:
                    found.append(f"{where}:{node.lineno} in {fn.name}: {ast.unparse(node)}")
    assert not found, "import these at the top of the module:\n" + "\n".join(sorted(set(found)))
