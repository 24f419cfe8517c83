"""What a variant's compiler sees, in a canonical form: the key of its tuning records.

A record stands as long as the code it timed stands. Raw file bytes made a comment in a shared file cost a re-tune of
most of the ladder, so a variant's code is read the way its compiler reads it:

- CUDA: each translation unit of its sources as the compiler sees it, the local `#include "..."` files expanded in
  place (each once, as `#pragma once` and include guards make them), comments dropped and white space collapsed:
  moving a helper into a shared header changes nothing where the unit comes out the same;
- Python: the syntax trees, docstrings left out, of the definitions the variant reaches: its build, launch and check
  functions, its own declaration in the module that registers it (the call that names its kernel file), and what
  those use, followed into the kernels/ modules they import: a comment, a docstring or another rung's declaration
  changes nothing; a Python source file it names (a Numba or TVM rung) counts whole, as its syntax tree.

Nothing here needs a GPU or a compiler, so CI proves every committed record current (`tuning check`).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
import types
from pathlib import Path

from kernels import registry

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"\s*$', re.MULTILINE)
GUARD = re.compile(r"^\s*#\s*pragma\s+once\s*$", re.MULTILINE)
COMMENTS = re.compile(r'//[^\n]*|/\*.*?\*/|("(?:\\.|[^"\\])*")', re.DOTALL)


def _strip_comments(text: str) -> str:
    return COMMENTS.sub(lambda m: m.group(1) or " ", text)


TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_]\w*|\.?\d[\w.]*|::|->|<<=|>>=|<<|>>|&&|\|\||'
                   r'\+\+|--|[-+*/%&|^!=<>]=|\S')


def _tokens(text: str) -> str:
    """The source as tokens: code as one stream, each preprocessor directive on a line of its own (its end is its
    line's), so that neither white space nor where lines break matters, as it does not to the compiler."""
    out, code = [], []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        if line.lstrip().startswith("#"):
            out += [" ".join(code), " ".join(TOKEN.findall(line))]
            code = []
        else:
            code += TOKEN.findall(line)
    out.append(" ".join(code))
    return "\n".join(part for part in out if part)


def cuda_unit(path: Path, seen: set | None = None) -> str:
    """The translation unit rooted at `path`, local includes expanded in place, each file once."""
    seen = set() if seen is None else seen
    path = path.resolve()
    if path in seen:
        return ""
    seen.add(path)
    text = GUARD.sub("", _strip_comments(path.read_text()))

    def expand(match):
        included = path.parent / match.group(1)
        return cuda_unit(included, seen) if included.exists() else match.group(0)

    return _tokens(INCLUDE.sub(expand, text))


def cuda_roots(files: list[Path]) -> list[Path]:
    """The CUDA files no other of `files` includes: the units the compiler is given."""
    cuda = [f for f in files if f.suffix in (".cu", ".cuh")]
    included = {(f.parent / name).resolve() for f in cuda for name in INCLUDE.findall(_strip_comments(f.read_text()))}
    return [f for f in cuda if f.resolve() not in included]


class _NoDocstrings(ast.NodeTransformer):
    def _drop(self, node):
        self.generic_visit(node)
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_Module = visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _drop


def _plain(node) -> str:
    """A syntax tree as text, fields that are empty or None left out: Python versions add fields (3.12's type_params)
    that older trees lack, and the key must be the same under every Python that runs the project."""
    if isinstance(node, ast.AST):
        fields = [f"{name}={_plain(value)}" for name, value in ast.iter_fields(node)
                  if value is not None and value != [] and name != "ctx"]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(_plain(item) for item in node)}]"
    return repr(node)


def _dump(node: ast.AST) -> str:
    return _plain(_NoDocstrings().visit(ast.parse(ast.unparse(node))))


def python_file(path: Path) -> str:
    return _dump(ast.parse(path.read_text()))


class _Module:
    """A kernels/ module's top-level definitions by name, and what each name it imports refers to."""

    def __init__(self, module: types.ModuleType):
        self.name = module.__name__
        self.tree = ast.parse(Path(module.__file__).read_text())
        self.defined: dict[str, list[ast.AST]] = {}
        self.imported: dict[str, tuple[str, str | None]] = {}  # local name -> (module, attribute or None)
        for node in self.tree.body:
            for name in _names_defined(node):
                self.defined.setdefault(name, []).append(node)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    self.imported[alias.asname or alias.name] = (target, None) if target in sys.modules else \
                        (node.module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    self.imported[alias.asname or alias.name.split(".")[0]] = (alias.name, None)


def _names_defined(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _followed(name: str) -> bool:
    """kernels/ modules that determine kernels (not the registry, nor those that only read what was compiled)."""
    return name.startswith("kernels.") and name != registry.__name__ and \
        getattr(sys.modules.get(name), "DETERMINES_KERNELS", True)


class Declarations:
    """The canonical definitions a variant reaches, collected across kernels/ modules."""

    def __init__(self):
        self.modules: dict[str, _Module] = {}
        self.parts: dict[tuple[str, str], str] = {}

    def _module(self, name: str) -> _Module | None:
        if not _followed(name) or name not in sys.modules or not getattr(sys.modules[name], "__file__", None):
            return None
        if name not in self.modules:
            self.modules[name] = _Module(sys.modules[name])
        return self.modules[name]

    def reach(self, module_name: str, name: str) -> None:
        """The top-level definition `name` of a module, and everything it refers to."""
        module = self._module(module_name)
        if module is None or (module_name, name) in self.parts:
            return
        if name in module.defined:
            nodes = module.defined[name]
            self.parts[(module_name, name)] = "\n".join(_dump(node) for node in nodes)
            for node in nodes:
                self.uses(module, node)
        elif name in module.imported:
            target, attribute = module.imported[name]
            if attribute:
                self.reach(target, attribute)

    def uses(self, module: _Module, node: ast.AST) -> None:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and \
                    module.imported.get(inner.value.id, ("", "x"))[1] is None and inner.value.id in module.imported:
                self.reach(module.imported[inner.value.id][0], inner.attr)  # ladder.Rung, tiles.cdiv
            elif isinstance(inner, ast.Name):
                self.reach(module.name, inner.id)

    def declaration(self, module_name: str, variant: registry.Variant) -> None:
        """The smallest call in the registering module that names the variant's own kernel file (its declaration,
        such as a ladder.Rung(...) among others), and what it uses."""
        module = self._module(module_name)
        if module is None:
            return
        names = {Path(f).name for f in variant.source_files if Path(f).stem == variant.name}
        calls = [node for node in ast.walk(module.tree) if names and isinstance(node, ast.Call) and any(
            isinstance(arg, ast.Constant) and arg.value in names for arg in ast.walk(node))]
        if calls:
            own = min(calls, key=lambda call: sum(1 for _ in ast.walk(call)))
            self.parts[(module_name, f"<declaration {sorted(names)}>")] = _dump(own)
            self.uses(module, own)

    def text(self) -> str:
        return "\n".join(f"{module}:{name}\n{part}" for (module, name), part in sorted(self.parts.items()))


def canonical(variant: registry.Variant) -> str:
    """The variant's code as its compilers see it (see the module's docstring)."""
    files = [Path(f) for f in variant.source_files]
    parts = [f"cuda {root.name}\n{cuda_unit(root)}" for root in cuda_roots(files)]
    parts += [f"python {f.name}\n{python_file(f)}" for f in files if f.suffix == ".py"]
    found = Declarations()
    for function in (variant.build, variant.run, variant.prepare, variant.unsupported, variant.check_params,
                     variant.tuner):
        if callable(function) and getattr(function, "__module__", None):
            found.reach(function.__module__, function.__qualname__.split(".")[0])
    if variant.key in registry.declared():  # a variant made outside the registry has no declaration to find
        found.declaration(registry.origin(variant.key), variant)
    parts.append(found.text())
    return "\n".join(parts)


_digests: dict[int, tuple] = {}  # id(variant) -> (variant, its files' bytes, digest)


def code_digest(variant: registry.Variant) -> str:
    """The digest of the variant's canonical code, computed once per variant object and content of the files it
    names (planning asks for it per record and per job), and kept across processes (see `_stored`)."""
    files = tuple(Path(f).read_bytes() for f in variant.source_files)
    known = _digests.get(id(variant))
    if known is None or known[0] is not variant or known[1] != files:
        known = _digests[id(variant)] = variant, files, _stored(variant, files)
    return known[2]


STORE = registry.KERNELS / "__pycache__" / "codekey.json"  # beside Python's own caches of these sources


def _stored(variant: registry.Variant, files: tuple[bytes, ...]) -> str:
    """The digest, from STORE where it was computed before from the same inputs: every file of kernels/, the
    variant's own files, this module, the Python version and which kernels/ modules this process has imported (what
    `canonical` reads). Each Snakemake invocation plans in a new process, and a no-change rerun would otherwise
    parse every variant's code again."""
    inputs = hashlib.sha256(json.dumps([variant.key, registry.origin(variant.key) if variant.key in
                                        registry.declared() else None, list(sys.version_info[:2]),
                                        sorted(n for n in sys.modules if n.startswith("kernels."))]).encode())
    for path in sorted(p for p in registry.KERNELS.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        inputs.update(str(path.relative_to(registry.KERNELS)).encode() + b"\0" + _file_digest(path))
    inputs.update(_file_digest(Path(__file__)))
    for content in files:
        inputs.update(hashlib.sha256(content).digest())
    key = inputs.hexdigest()
    store = _read_store()
    if key not in store:
        store[key] = hashlib.sha256(canonical(variant).encode()).hexdigest()[:16]
        _write_store(store)
    return store[key]


_file_digests: dict[Path, tuple] = {}  # path -> ((mtime_ns, size), sha256 of its bytes)


def _file_digest(path: Path) -> bytes:
    stat = path.stat()
    known = _file_digests.get(path)
    if known is None or known[0] != (stat.st_mtime_ns, stat.st_size):
        known = _file_digests[path] = (stat.st_mtime_ns, stat.st_size), hashlib.sha256(path.read_bytes()).digest()
    return known[1]


STORE_ENTRIES = 2048  # the newest kept: a store that only grew would be read whole by every plan


def _read_store() -> dict:
    try:
        return json.loads(STORE.read_text())
    except (OSError, ValueError):
        return {}


def _write_store(store: dict) -> None:
    """Atomically, and only where it can be written (a read-only checkout plans as before, parsing each time)."""
    try:
        STORE.parent.mkdir(exist_ok=True)
        tmp = STORE.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dict(list(store.items())[-STORE_ENTRIES:])))
        tmp.replace(STORE)
    except OSError:
        pass
