//! The architecture invariants a test can check (ARCHITECTURE.md, "Invariants"): which
//! top-level module may import which ([`LAYERS`], a table with no exceptions), no import loop
//! between top-level modules, the core knows no transport or SQL crate (only `api/` and
//! `store/` may), and every source file says what it owns in a `//!` header.
//!
//! Imports are read from the code, not from comments or string literals: every `crate::x`
//! path (in `use` lines and inline), each name of a `use crate::{a, b::c}` group, and
//! `super::` chains long enough to climb out of a top-level module into another.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A top-level module, the modules it may import, and why.
struct Layer {
    module: &'static str,
    may_import: &'static [&'static str],
    why: &'static str,
}

const fn layer(
    module: &'static str,
    may_import: &'static [&'static str],
    why: &'static str,
) -> Layer {
    Layer {
        module,
        may_import,
        why,
    }
}

/// Which top-level module may import which, bottom up: a module imports only rows above its
/// own. The core (down to `tools`) names no door, store or settings file; around it, the store
/// implements the core's ports, the service is the one façade, the doors translate, and the
/// server wires everything from settings.
#[rustfmt::skip]
const LAYERS: &[Layer] = &[
    // The core, bottom up.
    layer("tool",         &[],
          "the contract: sees a session through SessionView and a pool through ToolCatalog"),
    layer("event",        &[],
          "lifecycle events are plain data and a bus anyone may publish to"),
    layer("shell_syntax", &[],
          "reads bash lines; both bash's flags and the permission rules build on it"),
    layer("permission",   &["tool", "event", "shell_syntax"],
          "modes, rules, policies; the session and the store through its own ports"),
    layer("session",      &["tool", "permission"],
          "implements the views of the contract and of permission; carries its rules"),
    layer("registry",     &["tool", "permission", "session"],
          "which tools exist; a pool is assembled per session"),
    layer("hooks",        &["tool"],
          "the hook protocol: what a hook is told about a call and what it answers"),
    layer("dispatch",     &["tool", "event", "permission", "session", "registry", "hooks"],
          "runs batches through the pipeline; declares the ports the store implements"),
    layer("telemetry",    &["tool", "permission", "hooks", "dispatch"],
          "the metrics toold reports; records what a call's result says, and wraps the \
           core's ports (audit sink, hooks, approval waits) to count what only they see"),
    layer("tools",        &["tool", "shell_syntax", "permission", "registry", "dispatch",
                            "telemetry"],
          "the built-in tools: the session only through the contract's view; read_result pages \
           through dispatch's result port; the shell times its spawn (DESIGN §9's sandbox \
           series exists only there)"),
    layer("workspace",    &["tool", "tools", "registry", "permission"],
          "a session's filesystem as a copy-on-write view, and what crosses its boundary \
           (files, archives) as the contract's tools, resolved by the tools' path rules"),
    // Around the core.
    layer("mcp",          &["tool", "registry"],
          "the bridge: external MCP servers' tools registered as the contract's tools"),
    layer("provider",     &["tool", "registry", "permission"],
          "tools provided by connected programs, registered as the contract's tools; the \
           registering principal decides who may hold a name and which sessions see them"),
    layer("environment",  &[],
          "images pulled, checked and unpacked; what a session's environment may ask for"),
    layer("config",       &["permission", "hooks", "dispatch", "telemetry", "tools", "mcp",
                            "environment"],
          "file, environment and flags into each component's typed settings, one way \
           (`[telemetry]` is telemetry's, the OTEL_* variables land there)"),
    layer("store",        &["tool", "event", "permission", "session", "registry", "dispatch"],
          "persistence: the core types it stores, dispatch's ports, permission's ledger"),
    layer("service",      &["tool", "event", "permission", "session", "registry", "hooks",
                            "dispatch", "tools", "mcp", "provider", "store", "telemetry",
                            "environment",
                            "workspace"],
          "the one façade both doors call: the core plus the store's traits"),
    layer("api",          &["tool", "event", "permission", "registry", "store", "telemetry",
                            "service"],
          "the doors: wire formats into service calls, the vocabulary their answers use"),
    layer("server",       &["tool", "event", "permission", "session", "registry", "hooks",
                            "dispatch", "tools", "mcp", "provider", "store", "telemetry",
                            "service", "config", "api", "environment",
                            "workspace"],
          "wires settings into a running daemon: everything below it"),
    layer("client",       &[],
          "the terminal client knows the daemon only by its HTTP API, as JSON on the wire"),
    layer("cli",          &["config", "server", "client", "tools", "telemetry"],
          "parses flags into settings, installs the logs and traces (telemetry), and starts \
           the server, or hands over to the client, or \
           (hidden `sandbox-spawner`) runs a session's shell spawner, which needs neither \
           settings nor a server"),
    // The crate root and the binary, which reaches the library as `toold::`.
    layer("lib",          &[], "declares the modules"),
    layer("main",         &[], "the binary calls `toold::cli`"),
];

/// Modules that make up the core: they must not know the doors' or the store's crates.
#[rustfmt::skip]
const CORE_MODULES: &[&str] = &[
    "tool", "tools", "registry", "dispatch", "permission", "hooks", "session", "event",
    "shell_syntax", "provider", "workspace",
];

/// Crates only the doors (`api/`) may name.
const DOOR_CRATES: &[&str] = &["axum", "tonic", "prost", "hyper", "http", "rmcp"];

/// Crates only the store (`store/`) may name.
const STORE_CRATES: &[&str] = &["sqlx", "rusqlite"];

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn source_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    files
}

/// The top-level module a file belongs to (`src/dispatch/pipeline/audit.rs` → `dispatch`).
fn module_of(file: &Path) -> String {
    let relative = file.strip_prefix(src()).unwrap();
    let first = relative
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// How many `super::` lead from the file's module to the crate root: `src/a.rs` and
/// `src/a/mod.rs` are one below it, `src/a/b.rs` two. A file a sibling includes with
/// `#[path = "…"] mod tests;` is one below the sibling's module.
fn depth_of(file: &Path) -> usize {
    let relative = file.strip_prefix(src()).unwrap();
    let parts = relative.components().count();
    let own = if file.file_name().is_some_and(|n| n == "mod.rs") {
        parts - 1
    } else {
        parts
    };
    let Some(name) = file.file_name().and_then(|n| n.to_str()) else {
        return own;
    };
    let Some(dir) = file.parent() else {
        return own;
    };
    let attribute = format!("#[path = \"{name}\"]");
    let includer = std::fs::read_dir(dir).unwrap().find_map(|entry| {
        let sibling = entry.unwrap().path();
        let text = std::fs::read_to_string(&sibling).ok()?;
        (sibling != file && text.contains(&attribute)).then_some(sibling)
    });
    match includer {
        Some(sibling) => depth_of(&sibling) + 1,
        None => own,
    }
}

/// `source` with comments and the insides of string and char literals replaced by spaces,
/// line breaks kept (so line numbers still match).
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !is_ident(chars[i - 1]))
        {
            // A raw string: r"…" or r#"…"#, with as many hashes at the end.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            out.push('r');
            i += 2 + hashes;
            out.push_str(&" ".repeat(1 + hashes));
            while i < chars.len() && !chars[i..].starts_with(&close) {
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push_str(&" ".repeat(close.len()));
            i += close.len();
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\''); a lone quote is a lifetime and stays.
            out.push(' ');
            i += 1;
            if chars.get(i) == Some(&'\\') {
                out.push(' ');
                i += 1;
            }
            while i < chars.len() && chars[i] != '\'' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// One import of a top-level module: the line it is on, the module, the path as written.
#[derive(Debug, PartialEq)]
struct Import {
    line: usize,
    module: String,
    text: String,
}

/// The top-level modules `source` names (a file `depth` modules below the crate root).
fn imports(source: &str, depth: usize) -> Vec<Import> {
    let code = code_only(source);
    let bytes = code.as_bytes();
    let line_at = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut record = |at: usize, rest_at: usize| {
        let prefix = &code[at..rest_at];
        for (module, item) in path_heads(&code[rest_at..]) {
            found.push(Import {
                line: line_at(at),
                module,
                text: format!("{prefix}{item}"),
            });
        }
    };
    for (at, _) in code.match_indices("crate::") {
        let before = at.checked_sub(1).map(|b| bytes[b] as char);
        if before.is_some_and(|b| is_ident(b) || b == '$' || b == ':') {
            continue;
        }
        record(at, at + "crate::".len());
    }
    for (at, _) in code.match_indices("super::") {
        let before = at.checked_sub(1).map(|b| bytes[b] as char);
        if before.is_some_and(|b| is_ident(b) || b == ':') {
            continue;
        }
        let mut climbs = 0;
        let mut rest = at;
        while code[rest..].starts_with("super::") {
            climbs += 1;
            rest += "super::".len();
        }
        if climbs >= depth {
            record(at, rest);
        }
    }
    found
}

/// The first name of a path (`dispatch::X` → `dispatch`) or of each item of a group
/// (`{dispatch::X, event}` → `dispatch`, `event`), each with the path as written.
fn path_heads(rest: &str) -> Vec<(String, String)> {
    let rest = rest.trim_start();
    let path_at = |from: &str| -> String {
        let end = from
            .find([';', ',', '}', '(', ' ', '\n'])
            .unwrap_or(from.len());
        from[..end].to_owned()
    };
    if !rest.starts_with('{') {
        let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        return if name.is_empty() {
            vec![]
        } else {
            vec![(name, path_at(rest))]
        };
    }
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut item_start = true;
    for (at, c) in rest.char_indices() {
        match c {
            '{' => {
                depth += 1;
                item_start = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => item_start = true,
            c if item_start && depth == 1 && !c.is_whitespace() => {
                item_start = false;
                let name: String = rest[at..].chars().take_while(|&c| is_ident(c)).collect();
                if !name.is_empty() && name != "self" {
                    heads.push((name, format!("{{{}}}", path_at(&rest[at..]))));
                }
            }
            _ => {}
        }
    }
    heads
}

/// Unit tests may build what the code under test only sees through a view (a tool's tests make
/// a real `SessionState`): a test file (`*_tests.rs`, permission's `test_session.rs`) is left
/// out, and so is a file's inline `#[cfg(test)] mod tests`, which comes last by convention.
fn without_test_code(file: &Path, source: String) -> String {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with("_tests.rs") || name == "test_session.rs" {
        return String::new();
    }
    let lines: Vec<&str> = source.lines().collect();
    let inline_tests = lines.windows(2).position(|pair| {
        pair[0].trim() == "#[cfg(test)]" && pair[1].trim_start().starts_with("mod tests {")
    });
    match inline_tests {
        Some(at) => lines[..at].join("\n"),
        None => source,
    }
}

/// Every import of another top-level module, by the importing file, test code aside.
/// (The file is given relative to the crate, as `src/…`.)
fn crate_imports() -> Vec<(PathBuf, String, Import)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for file in source_files() {
        let module = module_of(&file);
        let source = without_test_code(&file, std::fs::read_to_string(&file).unwrap());
        let shown = file.strip_prefix(&root).unwrap_or(&file).to_path_buf();
        for import in imports(&source, depth_of(&file)) {
            if import.module != module {
                all.push((shown.clone(), module.clone(), import));
            }
        }
    }
    all
}

fn table() -> BTreeMap<&'static str, &'static Layer> {
    LAYERS.iter().map(|layer| (layer.module, layer)).collect()
}

/// A loop in `graph`, as the modules around it (`a → b → a`), if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_owned(), Mark::Open);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next.as_str()) {
                Some(Mark::Open) => {
                    let start = path.iter().position(|n| n == next).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(cycle) = visit(next, graph, marks, path) {
                        return Some(cycle);
                    }
                }
            }
        }
        path.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if !marks.contains_key(node.as_str())
            && let Some(cycle) = visit(node, graph, &mut marks, &mut Vec::new())
        {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn the_layer_table_names_every_top_level_module_once() {
    let modules: BTreeSet<String> = source_files().iter().map(|f| module_of(f)).collect();
    let listed: BTreeSet<String> = LAYERS.iter().map(|l| l.module.to_owned()).collect();
    assert_eq!(table().len(), LAYERS.len(), "a module is listed twice");
    assert_eq!(modules, listed, "src/ and the layer table disagree");
    for layer in LAYERS {
        assert!(!layer.why.is_empty(), "{} has no reason", layer.module);
        for target in layer.may_import {
            assert!(
                listed.contains(*target),
                "{} may import unknown module {target}",
                layer.module
            );
        }
    }
}

#[test]
fn the_layer_table_is_a_layering() {
    // Each row imports only rows above it, so the table itself can hold no loop.
    for (row, layer) in LAYERS.iter().enumerate() {
        for target in layer.may_import {
            let above = LAYERS[..row].iter().any(|l| l.module == *target);
            assert!(
                above,
                "{} may import {target}, which is not above it in the table",
                layer.module
            );
        }
    }
}

#[test]
fn modules_import_only_what_the_layer_table_allows() {
    let table = table();
    let violations: Vec<String> = crate_imports()
        .into_iter()
        .filter(|(_, module, import)| {
            table
                .get(module.as_str())
                .is_some_and(|layer| !layer.may_import.contains(&import.module.as_str()))
        })
        .map(|(file, module, import)| {
            format!(
                "{}:{}: {module} imports {} (`{}`), which the layer table does not allow",
                file.display(),
                import.line,
                import.module,
                import.text
            )
        })
        .collect();
    assert!(violations.is_empty(), "\n{}", violations.join("\n"));
}

#[test]
fn top_level_modules_import_each_other_without_loops() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut witness: BTreeMap<(String, String), String> = BTreeMap::new();
    for (file, module, import) in crate_imports() {
        graph
            .entry(module.clone())
            .or_default()
            .insert(import.module.clone());
        witness
            .entry((module, import.module))
            .or_insert_with(|| format!("{}:{}", file.display(), import.line));
    }
    if let Some(cycle) = find_cycle(&graph) {
        let edges: Vec<String> = cycle
            .windows(2)
            .map(|pair| {
                let at = &witness[&(pair[0].clone(), pair[1].clone())];
                format!("  {} → {} (e.g. {at})", pair[0], pair[1])
            })
            .collect();
        panic!("import loop: {}\n{}", cycle.join(" → "), edges.join("\n"));
    }
}

#[test]
fn the_import_reader_sees_what_it_should() {
    let heads = |source: &str, depth: usize| -> Vec<String> {
        imports(source, depth)
            .into_iter()
            .map(|i| i.module)
            .collect()
    };
    assert_eq!(heads("use crate::event::Event;", 1), ["event"]);
    assert_eq!(
        heads("use crate::{event::Event, tool::{self, ToolCall}};", 1),
        ["event", "tool"]
    );
    assert_eq!(
        heads(
            "use crate::{\n    event,\n    // crate::store\n    tool,\n};",
            1
        ),
        ["event", "tool"]
    );
    assert_eq!(heads("let x = crate::store::open();", 2), ["store"]);
    assert!(heads("// use crate::store::Store;", 1).is_empty());
    assert!(heads("/* crate::store */ let a = 1;", 1).is_empty());
    assert!(heads("let s = \"crate::store\";", 1).is_empty());
    assert!(heads("let s = r#\"crate::store\"#;", 1).is_empty());
    assert!(heads("let c = '\"'; let x = crate::store::X;", 1) == ["store"]);
    assert!(heads("fn f<'a>(x: &'a str) -> crate::tool::X {}", 1) == ["tool"]);
    assert!(heads("macro_rules! m { () => { $crate::store::X } }", 1).is_empty());
    assert!(heads("pub(crate) fn f() {}", 1).is_empty());
    // `super::` counts only when it climbs out to the crate root.
    assert_eq!(heads("use super::super::store::Store;", 2), ["store"]);
    assert!(heads("use super::super::pipeline::X;", 3).is_empty());
    assert_eq!(heads("use super::{event, tool::X};", 1), ["event", "tool"]);
    let found = imports("\n\nuse crate::{event::Event, tool};", 1);
    let shown: Vec<(usize, &str)> = found.iter().map(|i| (i.line, i.text.as_str())).collect();
    assert_eq!(shown, [(3, "crate::{event::Event}"), (3, "crate::{tool}")]);
}

#[test]
fn test_code_is_left_out_of_the_directions() {
    let source = "use crate::tool::X;\n#[cfg(test)]\nmod tests {\n    use crate::session::S;\n}\n";
    let kept = without_test_code(Path::new("src/tools/a.rs"), source.to_owned());
    assert_eq!(kept, "use crate::tool::X;");
    let whole = without_test_code(Path::new("src/tools/a_tests.rs"), source.to_owned());
    assert!(whole.is_empty());
    // A `#[cfg(test)]` item that is not the test module keeps what follows it.
    let item = "#[cfg(test)]\npub fn helper() {}\nuse crate::event::E;\n";
    assert_eq!(
        without_test_code(Path::new("src/x.rs"), item.to_owned()),
        item
    );
}

#[test]
fn the_loop_finder_prints_the_loop() {
    let graph = |edges: &[(&str, &str)]| {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in edges {
            graph
                .entry((*from).to_owned())
                .or_default()
                .insert((*to).to_owned());
        }
        graph
    };
    assert_eq!(
        find_cycle(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])),
        None
    );
    assert_eq!(
        find_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "b")])),
        Some(vec!["b".to_owned(), "c".to_owned(), "b".to_owned()])
    );
}

/// Whether `source` names crate `name` in code: `name::` or `use name` outside comments.
fn names_crate(source: &str, name: &str) -> Option<String> {
    source
        .lines()
        .map(str::trim_start)
        .filter(|line| !line.starts_with("//"))
        .find(|line| {
            let path_use = format!("{name}::");
            line.match_indices(&path_use).any(|(at, _)| {
                // Not a suffix of a longer identifier (e.g. `my_http::`).
                at == 0
                    || !line.as_bytes()[at - 1].is_ascii_alphanumeric()
                        && line.as_bytes()[at - 1] != b'_'
            }) || line.starts_with(&format!("use {name};"))
        })
        .map(str::to_owned)
}

#[test]
fn core_modules_know_no_transport_or_sql_crate() {
    let mut violations = Vec::new();
    for file in &source_files() {
        let module = module_of(file);
        let source = std::fs::read_to_string(file).unwrap();
        let mut forbidden: Vec<&str> = Vec::new();
        if module == "mcp" {
            // The bridge is rmcp's client, and names no other door crate.
            forbidden.extend(DOOR_CRATES.iter().filter(|name| **name != "rmcp"));
        } else if file.ends_with("telemetry/otlp.rs") || file.ends_with("telemetry/otlp_tests.rs") {
            // The OTLP exporter is a gRPC client of the collector (tonic, prost for its
            // answer, tonic's `http` for the method's path), and names no other door crate.
            let client = ["tonic", "prost", "http"];
            forbidden.extend(DOOR_CRATES.iter().filter(|name| !client.contains(*name)));
        } else if module != "api" {
            forbidden.extend(DOOR_CRATES);
        }
        if module != "store" {
            forbidden.extend(STORE_CRATES);
        }
        if CORE_MODULES.contains(&module.as_str()) {
            forbidden.extend(DOOR_CRATES.iter().chain(STORE_CRATES));
        }
        for name in forbidden {
            if let Some(line) = names_crate(&source, name) {
                violations.push(format!("{}: names `{name}`: {line}", file.display()));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_checker_catches_what_it_should() {
    assert!(names_crate("use axum::Router;", "axum").is_some());
    assert!(names_crate("    let s = sqlx::query(\"\");", "sqlx").is_some());
    assert!(names_crate("// axum::Router in a comment", "axum").is_none());
    assert!(names_crate("use my_http::x;", "http").is_none());
    assert!(names_crate("let status = StatusCode::OK;", "http").is_none());
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    let files = source_files();
    assert!(
        files.len() > 20,
        "found only {} files under src/",
        files.len()
    );
    let undocumented: Vec<_> = files
        .iter()
        .filter(|file| {
            let source = std::fs::read_to_string(file).unwrap();
            !source.trim_start().starts_with("//!")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        undocumented.is_empty(),
        "files without a //! header: {undocumented:?}"
    );
}

#[test]
fn core_modules_name_no_http_status_codes() {
    for file in source_files()
        .iter()
        .filter(|f| CORE_MODULES.contains(&module_of(f).as_str()))
    {
        let source = std::fs::read_to_string(file).unwrap();
        assert!(
            !source.contains("StatusCode"),
            "{} names HTTP status codes",
            file.display()
        );
    }
}
