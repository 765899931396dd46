//! Temporary scratch: prints `render().manifest()` (Legacy split) for comparison with helm-python-sdk.
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let chart = helm_engine::Chart::load(&a[1]).unwrap();
    let mut values_files = Vec::new();
    if a.len() > 2 {
        values_files.push(a[2].clone());
    }
    let opts = helm_engine::RenderOptions {
        release_name: "release-name".into(),
        namespace: "default".into(),
        values_files,
        split_mode: if std::env::var("LA").is_ok() { helm_engine::sort::SplitMode::LineAnchored } else { helm_engine::sort::SplitMode::Legacy },
        ..Default::default()
    };
    match helm_engine::render(&chart, &opts) {
        Ok(r) => print!("{}", r.manifest()),
        Err(e) => println!("ERROR: {e}"),
    }
}
