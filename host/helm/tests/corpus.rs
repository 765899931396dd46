//! Real-chart corpus (`../shared/charts/bitnami/*`, `../shared/charts/ingress-nginx` and
//! `../shared/charts/corpus/*`: public charts kept beside the repository, never in it) compared with Go Helm through the PyPI `helm-python-sdk`
//! oracle (`tests/oracle/render.py`). Cases whose chart is not on disk are skipped (`SKIP:`; with `CI=true` a failure).
//!
//! Objects compared: every document of the release manifest (the `helm template` stream without
//! hooks, order included) and every hook document. The oracle output is cached under
//! `target/helm-oracle/`. Without Python/helm-python-sdk the test prints `SKIP:` and passes.
//! `HELM_ORACLE_PYTHON` selects the interpreter (default: `target/helm-venv/bin/python`, then
//! `python3`); `CORPUS_DIFF=<chart>` prints the first differing documents.
//!
//! `corpus_defaults_match_helm` also renders, with its default values, every chart found under
//! the corpus roots (`../shared/charts/*`, `../shared/charts/bitnami/*`, `../shared/charts/corpus/*`
//! and, with `HELM_CORPUS_EXTRA=<dir>`, every chart in `<dir>` with its dependencies vendored
//! from its siblings, e.g. a bitnami snapshot's `bitnami/`), and fails if any chart Helm renders
//! differs. Helm renders each chart twice: what differs between its two renders (random
//! passwords, generated certificates, bcrypt salts, `now`) is masked, the rest must be identical:
//! the release manifest's documents and hooks, and every rendered template's text before it is
//! split (NOTES.txt included, whitespace included). The oracle embeds Helm 4.2.3, whose split
//! trims each document, so only the per-template text shows a stray newline before a `---`
//! (Helm ≥ 4.2.4, the engine's default `SplitMode::LineAnchored`, keeps it: issue #36's
//! redis/valkey class); with identical template text, both split modes give Helm's output.

mod common;

use common::{CASES, discover, fingerprint, oracle, repo_root, run_oracle};
use helm_engine::sort::{SplitMode, sort_manifests};
use helm_engine::{Chart, RenderOptions, render};

fn docs(stream: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in stream.split("---\n# Source: ").skip(1) {
        out.push(format!("# Source: {part}"));
    }
    out
}

#[test]
fn corpus_matches_helm() {
    let Some(results) = oracle(1) else { return };
    let show = std::env::var("CORPUS_DIFF").ok();
    let (mut total, mut same) = (0usize, 0usize);
    println!(
        "{:<22} {:>8} {:>8} {:>7}  stream",
        "chart", "objects", "same", "rate"
    );
    for case in CASES {
        if !common::available(case) {
            continue;
        }
        let res = &results[case.id];
        if let Some(err) = res["error"].as_str() {
            println!("{:<22} oracle error: {err}", case.id);
            continue;
        }
        let chart = Chart::load_dir(repo_root().join(case.chart)).expect("chart loads");
        // helm-python-sdk 0.2.2 embeds Helm 4.2.3, which splits documents the legacy way
        let opts = RenderOptions {
            values_files: vec![case.values.to_string()],
            split_mode: SplitMode::Legacy,
            ..Default::default()
        };
        let mine = render(&chart, &opts);
        let want_manifest = res["manifest"].as_str().unwrap_or_default();
        let want_files: Vec<(String, String)> = res["files"]
            .as_object()
            .map(|m| {
                m.iter()
                    // Helm's install drops NOTES.txt before sorting
                    .filter(|(k, _)| !k.ends_with("NOTES.txt"))
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let want_docs = docs(want_manifest);
        let want_hooks = sort_manifests(&want_files, SplitMode::Legacy)
            .map(|(h, _)| h)
            .expect("Helm's rendered files sort");
        let n = want_docs.len() + want_hooks.len();
        let (ok, stream_same) = match &mine {
            Ok(r) => {
                let got_docs = docs(&r.manifest());
                let mut ok = 0;
                for (i, w) in want_docs.iter().enumerate() {
                    if got_docs.get(i) == Some(w) {
                        ok += 1;
                    } else if show.as_deref() == Some(case.id) {
                        println!(
                            "--- want[{i}]\n{w}\n--- got[{i}]\n{}",
                            got_docs.get(i).map(String::as_str).unwrap_or("<none>")
                        );
                    }
                }
                for w in &want_hooks {
                    let hit = r
                        .hooks
                        .iter()
                        .any(|h| h.path == w.path && h.manifest == w.manifest);
                    if hit {
                        ok += 1;
                    } else if show.as_deref() == Some(case.id) {
                        println!("--- want hook {}\n{}", w.path, w.manifest);
                    }
                }
                let stream_same = r.manifest() == want_manifest;
                (ok, stream_same)
            }
            Err(e) => {
                println!("{:<22} render error: {e}", case.id);
                (0, false)
            }
        };
        total += n;
        same += ok;
        println!(
            "{:<22} {:>8} {:>8} {:>6.1}%  {}",
            case.id,
            n,
            ok,
            if n == 0 {
                100.0
            } else {
                100.0 * ok as f64 / n as f64
            },
            if stream_same { "identical" } else { "differs" }
        );
    }
    let rate = if total == 0 {
        1.0
    } else {
        same as f64 / total as f64
    };
    println!(
        "aggregate: {same}/{total} objects identical ({:.1}%)",
        rate * 100.0
    );
    assert!(
        rate >= common::CORPUS_MIN_RATE,
        "corpus pass rate {rate:.3} below {}",
        common::CORPUS_MIN_RATE
    );
}

/// The release manifest Helm stores for sorted manifests (`Rendered::manifest` without CRDs).
fn manifest_of(files: &serde_json::Value) -> Option<(String, Vec<helm_engine::sort::Hook>)> {
    let files: Vec<(String, String)> = files
        .as_object()?
        .iter()
        // Helm's install drops NOTES.txt before sorting
        .filter(|(k, _)| !k.ends_with("NOTES.txt"))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    let (hooks, manifests) = sort_manifests(&files, SplitMode::Legacy).ok()?;
    let mut b = String::new();
    for m in &manifests {
        b.push_str(&format!("---\n# Source: {}\n{}\n", m.name, m.content));
    }
    Some((b, hooks))
}

/// Whether `c` can be part of a random token (password, base64 data and its padding, which
/// follows the random length of a generated key, hash).
fn random_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')
}

/// `got` equals `want` where Helm's two renders `want` and `want2` agree; a line on which they
/// differ matches when `got` has the same text before and after the random token(s) (the
/// common prefix and suffix of the two, cut back to a non-token character).
fn same_masked(want: &str, want2: &str, got: &str) -> bool {
    if want == got {
        return true;
    }
    if want == want2 {
        return false;
    }
    let (a, b, g): (Vec<&str>, Vec<&str>, Vec<&str>) = (
        want.split('\n').collect(),
        want2.split('\n').collect(),
        got.split('\n').collect(),
    );
    if a.len() != b.len() {
        // a random value spanning a varying number of lines (a PEM block): same line count range
        return g.len() >= a.len().min(b.len()) && g.len() <= a.len().max(b.len());
    }
    if g.len() != a.len() {
        return false;
    }
    a.iter().zip(&b).zip(&g).all(|((a, b), g)| {
        if a == b {
            return a == g;
        }
        let mut p = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        while p > 0 && (!a.is_char_boundary(p) || random_char(a[..p].chars().last().unwrap())) {
            p -= 1;
        }
        let max_s = a.len().min(b.len()) - p;
        let mut s = a
            .bytes()
            .rev()
            .zip(b.bytes().rev())
            .take(max_s)
            .take_while(|(x, y)| x == y)
            .count();
        while s > 0
            && (!a.is_char_boundary(a.len() - s)
                || random_char(a[a.len() - s..].chars().next().unwrap()))
        {
            s -= 1;
        }
        g.len() >= p + s && g.starts_with(&a[..p]) && g.ends_with(&a[a.len() - s..])
    })
}

/// Documents whose parsed objects differ when the same render is split the Helm ≥ 4.2.4 way
/// (`SplitMode::LineAnchored`, the engine's default) instead of Helm 3 / ≤ 4.2.3's (the
/// oracle's): a block scalar that ends right before a `---` keeps its final newline in 4.2.4.
fn split_mode_object_diffs(r: &helm_engine::Rendered) -> Vec<String> {
    use helm_engine::yaml::parse;
    let files: Vec<(String, String)> = r
        .files
        .iter()
        .filter(|(k, _)| !k.ends_with("NOTES.txt"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let Ok((_, anchored)) = sort_manifests(&files, SplitMode::LineAnchored) else {
        return vec!["<LineAnchored split fails>".into()];
    };
    let mut out = Vec::new();
    for (a, l) in anchored.iter().zip(&r.manifests) {
        if a.content != l.content && parse(&a.content).ok() != parse(&l.content).ok() {
            out.push(a.name.clone());
        }
    }
    if anchored.len() != r.manifests.len() {
        out.push("<document count>".into());
    }
    out
}

/// The rendered templates (path → text before any splitting, whitespace included, NOTES.txt
/// included) that differ from Helm's per-template render `want` (masked where Helm's second
/// render `want2` differs), and the templates only one side rendered. Helm ≤ 4.2.3's split
/// trims every document, so a stray newline at a document's end is invisible in the release
/// manifest it stores; it is not in Helm ≥ 4.2.4's (which keeps trailing newlines) nor here.
fn template_diffs(
    want: &serde_json::Value,
    want2: &serde_json::Value,
    got: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let Some(w) = want.as_object() else {
        return vec!["<Helm gave no files>".into()];
    };
    let mut out = Vec::new();
    for (k, v) in w {
        let v = v.as_str().unwrap_or_default();
        let v2 = want2.get(k).and_then(|x| x.as_str()).unwrap_or(v);
        match got.get(k) {
            Some(g) if same_masked(v, v2, g) => {}
            Some(_) => out.push(k.clone()),
            None => out.push(format!("{k} (only Helm renders it)")),
        }
    }
    for k in got.keys().filter(|k| !w.contains_key(*k)) {
        out.push(format!("{k} (only we render it)"));
    }
    out
}

/// The first line where `got` differs from `want`, for `CORPUS_DIFF`.
fn first_difference(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.split('\n').collect(), got.split('\n').collect());
    let i = w.iter().zip(&g).take_while(|(a, b)| a == b).count();
    format!(
        "line {}: want {:?}, got {:?} ({} vs {} lines)",
        i + 1,
        w.get(i).copied().unwrap_or("<end>"),
        g.get(i).copied().unwrap_or("<end>"),
        w.len(),
        g.len()
    )
}

#[test]
fn corpus_defaults_match_helm() {
    let found = discover();
    let jobs: Vec<serde_json::Value> = found
        .iter()
        .map(|f| {
            serde_json::json!({
                "id": f.id,
                "chart": f.dir.display().to_string(),
                "name": "release-name",
                "namespace": "default",
                "values": {},
                "repeat": 1,
                "files2": true,
            })
        })
        .collect();
    let dirs: Vec<&std::path::Path> = found.iter().map(|f| f.dir.as_path()).collect();
    let Some(results) = run_oracle(&jobs, true, &fingerprint(&dirs)) else {
        return;
    };
    let show = std::env::var("CORPUS_DIFF").ok();
    let (mut identical, mut rendered, mut bad) = (0usize, 0usize, Vec::new());
    let mut helm_errors = Vec::new();
    let mut split_differs: Vec<(String, Vec<String>)> = Vec::new();
    println!("{:<36} {:>7} {:>7}  result", "chart", "objects", "same");
    for f in &found {
        let res = &results[&f.id];
        let chart = Chart::load_dir(&f.dir);
        let only = std::env::var("CORPUS_ONLY").ok();
        if only.as_deref().is_some_and(|o| !f.id.contains(o)) {
            continue;
        }
        // deep `include` chains need more than a test thread's default stack in debug builds
        let mine = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || {
                // Built here: options with a `lookup` borrow it, so they stay on one thread.
                let opts = RenderOptions {
                    split_mode: SplitMode::Legacy,
                    ..Default::default()
                };
                chart
                    .map_err(|e| e.to_string())
                    .and_then(|c| render(&c, &opts).map_err(|e| e.to_string()))
            })
            .unwrap()
            .join()
            .unwrap();
        if let Some(err) = res["error"].as_str() {
            let ours = match &mine {
                Ok(_) => "we render".to_string(),
                Err(e) => format!("we fail too: {e}"),
            };
            println!("{:<36} oracle-error: {err} ({ours})", f.id);
            helm_errors.push(f.id.clone());
            continue;
        }
        rendered += 1;
        let want = res["manifest"].as_str().unwrap_or_default();
        let (Some((want2, hooks2)), Some((_, hooks))) =
            (manifest_of(&res["files2"]), manifest_of(&res["files"]))
        else {
            println!("{:<36} differs: Helm's files do not sort", f.id);
            bad.push(f.id.clone());
            continue;
        };
        let r = match mine {
            Ok(r) => r,
            Err(e) => {
                println!("{:<36} differs: render error: {e}", f.id);
                bad.push(f.id.clone());
                continue;
            }
        };
        let by_split = split_mode_object_diffs(&r);
        if !by_split.is_empty() {
            split_differs.push((f.id.clone(), by_split));
        }
        let by_template = template_diffs(&res["files"], &res["files2"], &r.files);
        if show.as_deref() == Some(f.id.as_str()) {
            for k in &by_template {
                let want = res["files"][k].as_str().unwrap_or_default();
                let got = r.files.get(k).map(String::as_str).unwrap_or_default();
                println!("--- template {k}: {}", first_difference(want, got));
            }
        }
        let (wd, wd2, gd) = (docs(want), docs(&want2), docs(&r.manifest()));
        let n = wd.len() + hooks.len();
        let mut ok = 0;
        let mut masked = false;
        for (i, w) in wd.iter().enumerate() {
            let w2 = wd2.get(i).map(String::as_str).unwrap_or(w);
            let g = gd.get(i).map(String::as_str).unwrap_or("<none>");
            if same_masked(w, w2, g) {
                ok += 1;
                masked |= w != g;
            } else if show.as_deref() == Some(f.id.as_str()) {
                println!("--- want[{i}]\n{w}\n--- got[{i}]\n{g}");
            }
        }
        for (i, w) in hooks.iter().enumerate() {
            let w2 = hooks2
                .get(i)
                .filter(|h| h.path == w.path)
                .map(|h| h.manifest.as_str())
                .unwrap_or(&w.manifest);
            let hit = r
                .hooks
                .iter()
                .find(|h| h.path == w.path && same_masked(&w.manifest, w2, &h.manifest));
            if let Some(h) = hit {
                ok += 1;
                masked |= h.manifest != w.manifest;
            } else if show.as_deref() == Some(f.id.as_str()) {
                println!("--- want hook {}\n{}", w.path, w.manifest);
            }
        }
        let same = ok == n && gd.len() == wd.len() && r.hooks.len() == hooks.len();
        let verdict = match (same, masked) {
            (true, false) => "identical",
            (true, true) => "identical (random values masked)",
            _ => "differs",
        };
        let templates = if by_template.is_empty() {
            String::new()
        } else {
            format!("; templates differ: {}", by_template.join(", "))
        };
        println!("{:<36} {n:>7} {ok:>7}  {verdict}{templates}", f.id);
        let same = same && by_template.is_empty();
        if same {
            identical += 1;
        } else {
            bad.push(f.id.clone());
        }
    }
    println!(
        "defaults: {identical}/{rendered} charts identical; Helm cannot render {}: {:?}",
        helm_errors.len(),
        helm_errors
    );
    // not a failure: Helm ≥ 4.2.4 really gives these objects (the oracle embeds Helm 4.2.3)
    println!(
        "objects that differ between Helm ≤ 4.2.3 and ≥ 4.2.4 splitting (SplitMode::Legacy vs the default LineAnchored): {} charts",
        split_differs.len()
    );
    for (id, files) in &split_differs {
        println!("  {id}: {}", files.join(", "));
    }
    assert!(bad.is_empty(), "charts differing from Helm: {bad:?}");
}
