//! `cargo xtask house [--check]`: the house rules of the source tree, measured.
//!
//! Owns: reading every tracked `.rs` file (with `syn`) and reporting
//! - functions longer than [`MAX_FN_LINES`] (outside `#[cfg(test)]` modules, test files and
//!   the tables in [`TABLES`]),
//! - files with more than [`MAX_FILE_LINES`] lines of non-test code,
//! - import circles between the files of one crate's `src/` (file A names something of file B
//!   and B, directly or through others, names something of A — a parent `mod.rs` and its
//!   children included).
//!
//! `--check` (run by `cargo xtask test`) fails when any is found.
//! Must not touch: any file (it only reads).

use anyhow::{Context, Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// A reader should not have to hold more than this at once.
pub const MAX_FN_LINES: usize = 120;
/// Non-test lines per file.
pub const MAX_FILE_LINES: usize = 1000;

/// Functions that are tables (one registration or one row per line), with the reason.
const TABLES: &[(&str, &str, &str)] = &[
    (
        "host/helm/src/funcs/misc.rs",
        "register",
        "Helm's function table: one name → function per line",
    ),
    (
        "host/helm/src/funcs/strings.rs",
        "register",
        "Helm's function table: one name → function per line",
    ),
    (
        "host/helm/src/funcs/lists.rs",
        "register",
        "Helm's function table: one name → function per line",
    ),
    (
        "host/helm/src/funcs/helm.rs",
        "register",
        "Helm's function table: one name → function per line",
    ),
    (
        "host/apiserver/src/rbac/default_roles.rs",
        "aggregated_roles",
        "Kubernetes' bootstrap roles: one rule per line",
    ),
    (
        "host/src/cli/plugin/scaffold.rs",
        "templates",
        "the scaffold's files per language: one file per entry",
    ),
    (
        "host/apiserver/src/table.rs",
        "builtin_columns",
        "kubectl's columns per built-in kind: one row per column",
    ),
];

/// Whether a file holds only tests (a story, a test harness) or generated code.
fn is_test_or_generated(path: &str) -> bool {
    path.starts_with("tests/") || path.contains("/tests/") || path.ends_with("/tests.rs")
}

#[derive(Default)]
struct Findings {
    long_fns: Vec<(String, String, usize)>,
    long_files: Vec<(String, usize)>,
    circles: Vec<Vec<String>>,
}

pub fn run(root: &Path, check: bool) -> Result<()> {
    let files = tracked_rust_files(root)?;
    let mut findings = Findings::default();
    let mut crates: BTreeMap<PathBuf, Vec<(String, syn::File)>> = BTreeMap::new();
    for rel in &files {
        let text = std::fs::read_to_string(root.join(rel)).with_context(|| rel.clone())?;
        let file = syn::parse_file(&text).with_context(|| format!("parsing {rel}"))?;
        if !is_test_or_generated(rel) {
            measure(rel, &file, &text, &mut findings);
        }
        if let Some(src) = crate_src_dir(root, rel) {
            crates.entry(src).or_default().push((rel.clone(), file));
        }
    }
    for (src, files) in &crates {
        findings.circles.extend(circles_of_crate(root, src, files));
    }
    report(&findings);
    let found = findings.long_fns.len() + findings.long_files.len() + findings.circles.len();
    if check && found > 0 {
        bail!("{found} house rule(s) broken (cargo xtask house lists them)");
    }
    Ok(())
}

fn report(f: &Findings) {
    println!("functions over {MAX_FN_LINES} lines: {}", f.long_fns.len());
    for (file, name, n) in &f.long_fns {
        println!("  {n:5}  {file}  {name}");
    }
    println!(
        "files over {MAX_FILE_LINES} non-test lines: {}",
        f.long_files.len()
    );
    for (file, n) in &f.long_files {
        println!("  {n:5}  {file}");
    }
    println!("import circles: {}", f.circles.len());
    for (i, circle) in f.circles.iter().enumerate() {
        println!("  circle {}:", i + 1);
        for edge in circle {
            println!("    {edge}");
        }
    }
}

fn tracked_rust_files(root: &Path) -> Result<Vec<String>> {
    let out = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "*.rs",
        ])
        .output()
        .context("git ls-files")?;
    let mut files: Vec<String> = String::from_utf8(out.stdout)?
        .lines()
        .map(str::to_string)
        .filter(|f| root.join(f).exists())
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        (a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test")))
            || a.path().is_ident("test")
            || a.path().segments.last().is_some_and(|s| s.ident == "test")
    })
}

/// Function lengths and the non-test size of one file.
fn measure(rel: &str, file: &syn::File, text: &str, findings: &mut Findings) {
    struct Lengths<'a> {
        rel: &'a str,
        test_lines: usize,
        long: Vec<(String, usize)>,
    }
    impl Lengths<'_> {
        fn function(&mut self, name: String, span: proc_macro2::Span) {
            let n = span.end().line - span.start().line + 1;
            let table = TABLES
                .iter()
                .any(|(f, fname, _)| *f == self.rel && *fname == name);
            if n > MAX_FN_LINES && !table {
                self.long.push((name, n));
            }
        }
    }
    impl<'ast> Visit<'ast> for Lengths<'_> {
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            if is_cfg_test(&m.attrs) {
                let s = m.span();
                self.test_lines += s.end().line - s.start().line + 1;
            } else {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            if is_cfg_test(&f.attrs) {
                return;
            }
            self.function(
                f.sig.ident.to_string(),
                f.block.span().join(f.sig.span()).unwrap_or(f.block.span()),
            );
            syn::visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            if is_cfg_test(&f.attrs) {
                return;
            }
            self.function(
                f.sig.ident.to_string(),
                f.block.span().join(f.sig.span()).unwrap_or(f.block.span()),
            );
            syn::visit::visit_impl_item_fn(self, f);
        }
        fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
            if let Some(block) = &f.default {
                self.function(
                    f.sig.ident.to_string(),
                    block.span().join(f.sig.span()).unwrap_or(block.span()),
                );
            }
            syn::visit::visit_trait_item_fn(self, f);
        }
    }
    let mut lengths = Lengths {
        rel,
        test_lines: 0,
        long: Vec::new(),
    };
    lengths.visit_file(file);
    for (name, n) in lengths.long {
        findings.long_fns.push((rel.to_string(), name, n));
    }
    let code_lines = text.lines().count().saturating_sub(lengths.test_lines);
    if code_lines > MAX_FILE_LINES {
        findings.long_files.push((rel.to_string(), code_lines));
    }
}

/// `<crate>/src` for a file of a crate's library or binary (not its tests, benches, examples,
/// build script).
fn crate_src_dir(root: &Path, rel: &str) -> Option<PathBuf> {
    let path = Path::new(rel);
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d.file_name().is_some_and(|n| n == "src")
            && root.join(d).parent()?.join("Cargo.toml").exists()
        {
            return Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    None
}

/// A file's module path inside its crate: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`;
/// `lib.rs` is the root; `main.rs` (and `bin/*.rs`) are roots of their own, named `<main>`.
fn module_of(src: &Path, rel: &str) -> Vec<String> {
    let inner = Path::new(rel).strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = inner
        .iter()
        .map(|p| p.to_string_lossy().to_string())
        .collect();
    let last = parts.pop().unwrap_or_default();
    match last.as_str() {
        "lib.rs" if parts.is_empty() => {}
        "main.rs" if parts.is_empty() => parts.push("<main>".into()),
        "mod.rs" => {}
        other => parts.push(other.trim_end_matches(".rs").to_string()),
    }
    parts
}

/// The crate's library name as other crates of it (its `main.rs`) spell it.
fn lib_name(root: &Path, src: &Path) -> Option<String> {
    let manifest = std::fs::read_to_string(root.join(src).parent()?.join("Cargo.toml")).ok()?;
    let mut in_package = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(v) = line.strip_prefix("name") {
            let v = v.trim_start().strip_prefix('=')?.trim().trim_matches('"');
            return Some(v.replace('-', "_"));
        }
    }
    None
}

/// Every path a file names that starts at a module of its own crate, made absolute.
struct References<'a> {
    module: Vec<String>,
    lib: Option<&'a str>,
    children: BTreeSet<String>,
    found: Vec<Vec<String>>,
    /// Names brought in by this file's `use` items (top level), with their absolute origin
    /// (`None`: another crate).
    imported: BTreeMap<String, Option<Vec<String>>>,
    depth: usize,
}

impl References<'_> {
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let in_main = self.module.first().is_some_and(|m| m == "<main>");
        let mut base: Vec<String> = match first.as_str() {
            "crate" if in_main => vec!["<main>".into()],
            "crate" => Vec::new(),
            f if Some(f) == self.lib => Vec::new(),
            "self" => self.module.clone(),
            "super" => self.module.clone(),
            c if self.children.contains(c) => {
                let mut m = self.module.clone();
                m.push(c.to_string());
                return Some(m.into_iter().chain(segments[1..].iter().cloned()).collect());
            }
            _ => return None,
        };
        let mut rest = &segments[1..];
        if first == "super" {
            base.pop();
        }
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.import(n.ident.to_string(), prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.import(r.rename.to_string(), prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.record(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn import(&mut self, name: String, path: &[String]) {
        let abs = self.absolute(path);
        if self.depth == 0 && name != "self" {
            self.imported.insert(name, abs.clone());
        }
        self.found.extend(abs);
    }

    fn record(&mut self, segments: Vec<String>) {
        if let Some(abs) = self.absolute(&segments) {
            self.found.push(abs);
        }
    }
}

impl<'ast> Visit<'ast> for References<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // Test modules may reach anywhere; inline modules are rare and named with the file.
        if !is_cfg_test(&m.attrs) && m.content.is_none() {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_cfg_test(&f.attrs) {
            self.depth += 1;
            syn::visit::visit_item_fn(self, f);
            self.depth -= 1;
        }
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        self.depth += 1;
        syn::visit::visit_item_impl(self, i);
        self.depth -= 1;
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if !is_cfg_test(&u.attrs) {
            self.use_tree(&mut Vec::new(), &u.tree);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 {
            self.record(p.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Paths inside macro calls (format args, vec![…]) as far as they parse as expressions.
        if let Ok(args) = m.parse_body_with(
            syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
        ) {
            for e in &args {
                self.visit_expr(e);
            }
        }
        syn::visit::visit_macro(self, m);
    }
}

fn circles_of_crate(root: &Path, src: &Path, files: &[(String, syn::File)]) -> Vec<Vec<String>> {
    let lib = lib_name(root, src);
    let modules: BTreeMap<Vec<String>, &str> = files
        .iter()
        .map(|(rel, _)| (module_of(src, rel), rel.as_str()))
        .collect();
    // What each file's `use` items bring in by name, so that naming a re-export (or a parent's
    // import, through `super::`) counts as naming the module that defines it.
    let mut imports: BTreeMap<&str, BTreeMap<String, Option<Vec<String>>>> = BTreeMap::new();
    let mut found: Vec<(&str, Vec<Vec<String>>)> = Vec::new();
    for (rel, file) in files {
        let module = module_of(src, rel);
        let children = file
            .items
            .iter()
            .filter_map(|i| match i {
                syn::Item::Mod(m) if m.content.is_none() && !is_cfg_test(&m.attrs) => {
                    Some(m.ident.to_string())
                }
                _ => None,
            })
            .collect();
        let mut refs = References {
            module: module.clone(),
            lib: lib.as_deref(),
            children,
            found: Vec::new(),
            imported: BTreeMap::new(),
            depth: 0,
        };
        refs.visit_file(file);
        imports.insert(rel.as_str(), std::mem::take(&mut refs.imported));
        found.push((rel.as_str(), refs.found));
    }
    let resolve = |path: &[String]| -> Option<&str> {
        let mut path = path.to_vec();
        for _ in 0..8 {
            // The deepest module file the path names …
            let (n, target) = (0..=path.len())
                .rev()
                .find_map(|n| modules.get(&path[..n]).map(|t| (n, *t)))?;
            // … unless the next name is one that file only imports: then its origin.
            match path.get(n).and_then(|name| imports.get(target)?.get(name)) {
                Some(None) => return None,
                Some(Some(origin)) if origin.as_slice() != &path[..=n] => {
                    let mut next = origin.clone();
                    next.extend(path[n + 1..].iter().cloned());
                    path = next;
                }
                _ => return Some(target),
            }
        }
        None
    };
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut why: BTreeMap<(&str, &str), String> = BTreeMap::new();
    for (rel, paths) in found {
        for path in paths {
            if let Some(target) = resolve(&path)
                && target != rel
            {
                edges.entry(rel).or_default().insert(target);
                why.entry((rel, target)).or_insert_with(|| path.join("::"));
            }
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            // Each edge inside the circle, with the first path that makes it.
            let mut lines = Vec::new();
            for &a in &c {
                for &b in edges.get(a).into_iter().flatten() {
                    if c.contains(&b) {
                        lines.push(format!("{a} uses {b} ({})", why[&(a, b)]));
                    }
                }
            }
            lines
        })
        .collect()
}

/// Tarjan's strongly connected components.
fn strongly_connected<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(v: &'a str, edges: &BTreeMap<&'a str, BTreeSet<&'a str>>, s: &mut State<'a>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, edges, s);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(k, v)| std::iter::once(*k).chain(v.iter().copied()))
        .collect();
    for v in nodes {
        if !state.index.contains_key(v) {
            visit(v, edges, &mut state);
        }
    }
    state.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_and_child_naming_each_other_are_a_circle() {
        let mut edges = BTreeMap::new();
        edges.insert("a/mod.rs", BTreeSet::from(["a/b.rs"]));
        edges.insert("a/b.rs", BTreeSet::from(["a/mod.rs"]));
        edges.insert("c.rs", BTreeSet::from(["a/b.rs"]));
        let circles: Vec<_> = strongly_connected(&edges)
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect();
        assert_eq!(circles, vec![vec!["a/b.rs", "a/mod.rs"]]);
    }

    #[test]
    fn module_paths_follow_the_file_layout() {
        let src = Path::new("host/src");
        assert_eq!(module_of(src, "host/src/lib.rs"), Vec::<String>::new());
        assert_eq!(module_of(src, "host/src/main.rs"), vec!["<main>"]);
        assert_eq!(module_of(src, "host/src/a/mod.rs"), vec!["a"]);
        assert_eq!(module_of(src, "host/src/a/b.rs"), vec!["a", "b"]);
    }

    #[test]
    fn super_and_crate_paths_are_made_absolute() {
        let refs = References {
            module: vec!["a".into(), "b".into()],
            lib: Some("deployer_host"),
            children: BTreeSet::from(["c".to_string()]),
            found: Vec::new(),
            imported: BTreeMap::new(),
            depth: 0,
        };
        let s = |p: &str| p.split("::").map(str::to_string).collect::<Vec<_>>();
        assert_eq!(refs.absolute(&s("super::x::Y")), Some(s("a::x::Y")));
        assert_eq!(refs.absolute(&s("crate::z")), Some(s("z")));
        assert_eq!(refs.absolute(&s("deployer_host::z")), Some(s("z")));
        assert_eq!(refs.absolute(&s("c::D")), Some(s("a::b::c::D")));
        assert_eq!(refs.absolute(&s("serde::Serialize")), None);
    }
}
