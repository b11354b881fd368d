"""The names the user docs (README.md, docs/*.md) use exist: `make` targets in the
Makefile and mk/*.mk, sluice-server flags in server/internal/config, sluice-bench flags
in bench-job/cmd/sluice-bench, and the Pool/Queue/Benchmark fields (`spec.x.y`,
`status.x[].y`) in crds/. Only code (inline code spans and fenced blocks) is read, so
prose may say "make sure" freely. Every missing name is reported at once, as file:line."""

from __future__ import annotations

import fnmatch
import functools
import pathlib
import re
from dataclasses import dataclass
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Code:
    """Code is one piece of code in a doc: one line of a fenced block (continued lines
    joined), or one inline code span (newlines as spaces). The text `around` a span (up
    to 80 characters before it and 25 after, in its paragraph) is its context: what says
    whose flag `--x` is ("the server's `--x`")."""

    path: pathlib.Path
    line: int
    text: str
    around: str = ""

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# CommonMark code spans: a run of n backticks up to the next run of exactly n.
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def _spans(path: pathlib.Path, lines: list[str], start: int) -> list[Code]:
    """_spans are the code spans of one paragraph (lines from index `start`)."""
    text = "\n".join(lines)
    out = []
    for m in _SPAN.finditer(text):
        line = start + text.count("\n", 0, m.start())
        around = text[max(m.start() - 80, 0) : m.start()] + " " + text[m.end() : m.end() + 25]
        out.append(Code(path, line + 1, m.group(2).replace("\n", " ").strip(), around.replace("\n", " ")))
    return out


@functools.cache
def code_of(path: pathlib.Path) -> tuple[Code, ...]:
    """code_of is every piece of code in a Markdown file. A table row is a paragraph
    of its own (a span never crosses cells' rows)."""
    lines = path.read_text().splitlines()
    out: list[Code] = []
    para: list[str] = []
    para_start = 0
    fence: str | None = None
    pending = ""
    pending_line = 0

    def flush() -> None:
        nonlocal para
        if para:
            out.extend(_spans(path, para, para_start))
        para = []

    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is not None:
            if (
                m
                and m.group(1)[0] == fence[0]
                and len(m.group(1)) >= len(fence)
                and not line.strip()[len(m.group(1)) :]
            ):
                fence = None
                continue
            if not pending:
                pending_line = i
            pending += line.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            out.append(Code(path, pending_line + 1, pending.strip()))
            pending = ""
            continue
        if m:
            flush()
            fence = m.group(1)
            continue
        if not line.strip() or line.lstrip().startswith("|"):
            flush()
            if line.strip():
                para, para_start = [line], i
                flush()
            continue
        if not para:
            para_start = i
        para.append(line)
    flush()
    return tuple(out)


def all_code() -> list[Code]:
    return [c for path in DOCS for c in code_of(path)]


# ---- commands in a piece of code ------------------------------------------------

_OPERATORS = re.compile(r"\s*(?:&&|\|\||[;|()<>]|\$\(|`)\s*")
# <release>, <shard>: a placeholder is part of a word (<release>-operator), not a redirection.
_PLACEHOLDER = re.compile(r"<[A-Za-z][\w.|/-]*>")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PREFIXES = {"sudo", "env", "time", "exec", "command"}


def _words(command: str) -> list[str]:
    """_words splits one simple command into words: quotes keep their spaces (a
    VAR="a b" assignment is one word) and a # word starts a comment."""
    words: list[str] = []
    for m in re.finditer(r"""(?:[^\s'"]+|'[^']*'|"[^"]*")+|'[^']*$|"[^"]*$""", command):
        if m.group(0).startswith("#"):
            break
        words.append(m.group(0))
    return words


def commands(code: Code) -> list[list[str]]:
    """commands are the simple commands of a piece of code, each as its words from its
    command word on (leading VAR=value assignments and sudo/env/time dropped)."""
    out = []
    for part in _OPERATORS.split(_PLACEHOLDER.sub("@placeholder@", code.text)):
        words = _words(part)
        while words and (_ASSIGN.match(words[0]) or words[0] in _PREFIXES):
            words = words[1:]
        if words:
            out.append(words)
    return out


# ---- (a) make targets -----------------------------------------------------------

_RULE = re.compile(r"^([^\s:#=][^:#=]*?)\s*::?(?!=)")
# make options that take the next word as their value
_MAKE_VALUE_OPTIONS = {"-C", "-f", "-I", "-o", "-W", "--directory", "--file", "--makefile"}


@functools.cache
def make_targets() -> frozenset[str]:
    """make_targets are the targets of the rules in Makefile and mk/*.mk (`name: ...`,
    several names before one colon, double-colon rules), outside define blocks and
    recipes; names made of variables ($(STAMP)) and special targets (.PHONY) are left out."""
    out: set[str] = set()
    for path in [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]:
        joined = re.sub(r"\\\n", " ", path.read_text())
        in_define = False
        for line in joined.splitlines():
            if re.match(r"^\s*define\b", line):
                in_define = True
            elif re.match(r"^\s*endef\b", line):
                in_define = False
            elif not in_define and not line.startswith("\t"):
                m = _RULE.match(line)
                if m:
                    out |= {n for n in m.group(1).split() if "$" not in n and not n.startswith(".")}
    return frozenset(out)


def make_mentions() -> list[tuple[Code, str]]:
    """make_mentions are the (code, target) of every `make TARGET ...` in the docs' code:
    options and VAR=value words are skipped; a target may be a glob (bench-*)."""
    out = []
    for code in all_code():
        for words in commands(code):
            if words[0] != "make":
                continue
            skip = False
            for w in words[1:]:
                if skip:
                    skip = False
                elif w in _MAKE_VALUE_OPTIONS:
                    skip = True
                elif w.startswith("-") or "=" in w:
                    continue
                elif re.fullmatch(r"[A-Za-z0-9_.*/-]+", w):
                    out.append((code, w))
                else:
                    break  # <target> placeholders, prose after a span's command
    return out


def test_make_targets_exist() -> None:
    targets = make_targets()
    assert {"up", "test", "help", "test-operator"} <= targets, sorted(targets)
    mentions = make_mentions()
    assert len(mentions) > 50, "the scanner finds the docs' make commands"
    missing = [
        f"{code.where()}: make {target} (no such target in Makefile or mk/*.mk)"
        for code, target in mentions
        if not fnmatch.filter(targets, target)
    ]
    assert not missing, "\n".join(missing)


# ---- (b), (c) flags of sluice-server and sluice-bench ---------------------------

SERVER, BENCH = "sluice-server", "sluice-bench"
# A flag: one or two dashes at a word's start, lowercase words joined by - _ or .,
# maybe a trailing * (a family: --delivery-retry-*); -pN or -1 are not flags.
_FLAG = re.compile(r"(?<![\w/.*@-])--?([a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*)(-?\*)?(?![\w.])")
# Its subcommands, and the fault kinds (sluice-bench fault partition|delay|fill --port P).
_BENCH_SUBCOMMANDS = {"run", "report", "compare", "merge", "scenarios", "fault", "partition", "delay", "fill"}
# Prose that says whose flag a code span is, outside the tool's own doc.
_CONTEXT = {
    SERVER: re.compile(r"sluice-server|(?<![\w-])server's|server\.md", re.I),
    BENCH: re.compile(r"sluice-bench", re.I),
}
# The docs about one tool, where a span that starts with a flag is that tool's
# (docs/api.md is the server's HTTP API: its `--x` are the server's limits and modes).
_OWN_DOC = {"server.md": SERVER, "api.md": SERVER, "sluice-bench.md": BENCH}


def _go_sources(directory: pathlib.Path) -> str:
    return "\n".join(p.read_text() for p in sorted(directory.glob("*.go")) if not p.name.endswith("_test.go"))


@functools.cache
def server_flags() -> frozenset[str]:
    """server_flags are sluice-server's flags: every option of the one options table
    (add/opt and the helpers that wrap opt: the name, then its usage text) and the
    flags Load defines itself (fs.StringVar(&x, "config", ...))."""
    src = _go_sources(ROOT / "server" / "internal" / "config")
    names = re.findall(r"\b[A-Za-z_]\w*\(\s*\"([a-z][a-z0-9-]*)\",\s*\"", src)
    names += re.findall(r"\bfs\.\w+\(\s*&[\w.]+,\s*\"([a-z][a-z0-9-]*)\"", src)
    return frozenset(names)


def _bench_names(src: str) -> list[str]:
    """_bench_names are the flags Go source defines: fs.XVar(&v, "name", ...),
    fs.X("name", ...), and the names intFlag/strFlag define (every string after the usage)."""
    names = re.findall(r"\bfs\.\w*Var\(\s*&?[\w.]+,\s*\"([a-z][a-z0-9_-]*)\"", src)
    names += re.findall(r"\bfs\.(?:String|Bool|Int|Int64|Uint|Uint64|Float64|Duration)\(\s*\"([a-z][a-z0-9_-]*)\"", src)
    # intFlag(fs, &p, 1, "usage", "pp", ...), strFlag(fs, &p, "default", "usage", "s", ...)
    for helper, call in re.findall(r"\b(intFlag|strFlag)\((.*)\)\s*$", src, re.M):
        names += re.findall(r'"([^"]*)"', call)[1 if helper == "intFlag" else 2 :]
    return names


@functools.cache
def bench_flagsets() -> dict[str, frozenset[str]]:
    """bench_flagsets are the flags of each sluice-bench subcommand, by the function that
    makes its flag set: flag.NewFlagSet("sluice-bench merge", ...) is merge's (and
    "sluice-bench fault "+kind fault's); the one named by a variable is newRunFlags', which
    run and the zaqar-bench mode (no subcommand) share."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / "bench-job" / "cmd" / "sluice-bench").glob("*.go")):
        if path.name.endswith("_test.go"):
            continue
        for func in re.split(r"\n(?=func )", path.read_text()):
            m = re.search(r'flag\.NewFlagSet\(("sluice-bench ([a-z]+))?', func)
            if m:
                out.setdefault(m.group(2) or "run", set()).update(_bench_names(func))
    return {k: frozenset(v) for k, v in out.items()}


def bench_flags() -> frozenset[str]:
    """bench_flags are the flags of every sluice-bench subcommand."""
    return frozenset().union(*bench_flagsets().values())


def _tool(words: list[str], doc: str) -> str | None:
    """_tool is whose flags a command's words are: the command word's tool (for
    sluice-bench, "sluice-bench SUB" with the subcommand whose flags they are), the doc's
    own tool for a command that starts with a flag (or a sluice-bench subcommand in its
    doc), "context" for a flag-first span elsewhere, None for any other command."""
    first = words[0].rsplit("/", 1)[-1]
    if first == SERVER:
        return first
    if first == BENCH:
        sub = words[1] if len(words) > 1 else ""
        return f"{BENCH} {sub if sub in bench_flagsets() else 'run'}"
    own = _OWN_DOC.get(doc)
    if first.startswith("-"):
        return own or "context"
    if own == BENCH and first in _BENCH_SUBCOMMANDS:
        return f"{BENCH} {first if first in bench_flagsets() else 'fault'}"
    return None


def flag_mentions() -> list[tuple[Code, str, set[str]]]:
    """flag_mentions are (code, flag, the tools it may belong to) for every flag in the
    docs' code that is sluice-server's or sluice-bench's: in the tool's own doc (docs/server.md,
    docs/api.md, docs/sluice-bench.md) every command of the tool or starting with a flag; elsewhere a
    command of the tool, or a flag-first span on a line naming the tool (server's `--x`)."""
    out = []
    for code in all_code():
        for words in commands(code):
            tool = _tool(words, code.path.name)
            if tool is None:
                continue
            tools = {tool}
            if tool == "context":
                tools = {t for t, rx in _CONTEXT.items() if rx.search(code.around)}
                if not tools:
                    continue
            for m in _FLAG.finditer(" ".join(words)):
                out.append((code, m.group(0), tools))
    return out


def _known(flag: str, tools: set[str]) -> bool:
    name = flag.lstrip("-")
    known: frozenset[str] = frozenset()
    for tool in tools:
        if tool == SERVER:
            known |= server_flags()
        elif tool == BENCH:
            known |= bench_flags()
        else:
            known |= bench_flagsets()[tool.split()[1]]
    if name.endswith("*"):
        return bool(fnmatch.filter(known, name))
    return name in known


def test_flags_exist() -> None:
    assert {"listen", "store", "catalog", "auth", "keystone-url", "tls-cert-file", "config"} <= server_flags()
    assert {"pp", "producer_processes", "producer-processes", "scenario", "faults", "proxy-port"} <= bench_flags()
    mentions = flag_mentions()
    assert set(bench_flagsets()) == {"run", "report", "compare", "merge", "fault"}, sorted(bench_flagsets())
    for tool, least in ((SERVER, 100), (BENCH, 100)):
        found = sum(1 for _, _, t in mentions if any(x.startswith(tool) for x in t))
        assert found > least, f"the scanner finds {tool} flags in the docs"
    missing = [
        f"{code.where()}: {flag} ({' or '.join(sorted(tools))} has no such flag)"
        for code, flag, tools in mentions
        if not _known(flag, tools)
    ]
    assert not missing, "\n".join(missing)


# ---- (d) CRD fields --------------------------------------------------------------

# spec.x / status.x[].y / .status.x[?(@.type=="Ready")].message (a kubectl jsonpath),
# not the tail of another path (.spec.template.spec.volumes has one path, from the first
# spec) nor a file name (api/status.go).
_PATH = re.compile(r"(?<![\w.\]/-])\.?(?:spec|status)(?:\.[A-Za-z_]\w*|\[[^\]\s]*\])+")
_SEGMENT = re.compile(r"\.([A-Za-z_]\w*)|\[([^\]]*)\]")
_FILE_SUFFIXES = {"go", "py", "md", "json", "yaml", "yml", "txt", "sh"}


@functools.cache
def crd_schemas() -> tuple[dict[str, Any], ...]:
    """crd_schemas are the openAPIV3Schema of every version of every CRD in crds/."""
    out = []
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for version in (doc or {}).get("spec", {}).get("versions", []):
                out.append(version["schema"]["openAPIV3Schema"])
    return tuple(out)


def _children(node: dict[str, Any], name: str) -> list[dict[str, Any]] | None:
    """_children are the schemas field `name` of an object node may have (properties,
    also under allOf/anyOf/oneOf, else additionalProperties); [{}] for anything (a node
    that preserves unknown fields); None when it has no such field."""
    if node.get("x-kubernetes-preserve-unknown-fields") or node.get("additionalProperties") is True:
        return [{"x-kubernetes-preserve-unknown-fields": True}]
    found = []
    for branch in [node, *node.get("allOf", []), *node.get("anyOf", []), *node.get("oneOf", [])]:
        if name in branch.get("properties", {}):
            found.append(branch["properties"][name])
    if not found and isinstance(node.get("additionalProperties"), dict):
        found.append(node["additionalProperties"])
    return found or None


def resolves(path: str) -> bool:
    """resolves: the path names a field of some CRD's schema: .name an object's field,
    [] [*] [0] [?(...)] an array's items (or a map's values)."""
    segments = _SEGMENT.findall(path.lstrip("."))
    first = path.lstrip(".").split(".", 1)[0].split("[", 1)[0]
    for schema in crd_schemas():
        nodes: list[dict[str, Any]] = list(_children(schema, first) or [])
        for name, index in segments:
            step: list[dict[str, Any]] = []
            for node in nodes:
                if node.get("x-kubernetes-preserve-unknown-fields"):
                    step.append(node)
                elif name:
                    step += _children(node, name) or []
                elif "items" in node:
                    step.append(node["items"])
                elif isinstance(node.get("additionalProperties"), dict) and not index.startswith("?"):
                    step.append(node["additionalProperties"])
            nodes = step
        if nodes:
            return True
    return False


# A kubectl command on another kind: its paths are that kind's (deploy .spec.template...).
_KUBECTL = re.compile(
    r"(?:^|[\s;&|(])(?:kubectl|k)\s+(?:-n\s+\S+\s+)?(?:get|describe|patch|edit|wait|explain)\s+"
    r"(?:-n\s+\S+\s+)?([a-z][\w.-]*)"
)
_RANGE = re.compile(r"\{range\s+(\.(?:spec|status)[^}\s]*)\}(.*?)\{end\}")
# Fields of Kubernetes' own kinds that the docs name in passing.
_FOREIGN = {"spec.nodeName"}  # a Pod's node


@functools.cache
def crd_kinds() -> frozenset[str]:
    """crd_kinds are the names kubectl knows the three CRDs by (kind, plural, singular, short names)."""
    out: set[str] = set()
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            names = (doc or {}).get("spec", {}).get("names", {})
            out |= {names.get("kind", "").lower(), names.get("plural", ""), names.get("singular", "")}
            out |= set(names.get("shortNames", []))
    return frozenset(out - {""})


def path_mentions() -> list[tuple[Code, str]]:
    """path_mentions are the (code, path) of every spec./status. path in the docs' code
    but those of a kubectl command on another kind, of a file (status.go) and _FOREIGN."""
    out = []
    for code in all_code():
        kinds = {m.group(1).split("/")[0].split(".")[0] for m in _KUBECTL.finditer(code.text)}
        if kinds - crd_kinds():
            continue
        for m in _PATH.finditer(code.text):
            path = m.group(0)
            if path in _FOREIGN or (path.rsplit(".", 1)[-1] in _FILE_SUFFIXES and path.count(".") == 1):
                continue  # status.go, spec.json: a file
            out.append((code, path))
        # jsonpath='{range .status.shards[*]}{.name} {.weight}{end}': fields of each item
        for m in _RANGE.finditer(code.text):
            out += [(code, m.group(1) + rel) for rel in re.findall(r"\{(\.[A-Za-z_][\w.]*)\}", m.group(2))]
    return out


def test_crd_fields_exist() -> None:
    assert resolves("spec.shards") and resolves('.status.conditions[?(@.type=="Ready")].message')
    assert resolves("status.shards[].queueNames") and not resolves("spec.shards.name")
    mentions = path_mentions()
    assert len(mentions) > 200, "the scanner finds the docs' field paths"
    missing = [
        f"{code.where()}: {path} (no such field in crds/*.yaml)" for code, path in mentions if not resolves(path)
    ]
    assert not missing, "\n".join(missing)
