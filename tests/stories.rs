//! The host's stories, as one test binary: each module is one story file of `tests/`.
//!
//! One binary rather than one per file: each of the 37 of them linked ~170 MB (wasmtime, kube, the
//! embedded API server), 6 GB of test executables in all that filled a CI disk, and 37 links
//! of it took minutes. Run one story file with its module path as the filter:
//! `cargo test -p deployer-host --test stories locking::` (docs/ci.md).

mod container_deployer;
mod continuous_reconcile;
mod contract_rules;
mod dev_mode;
mod faulty_plugins;
mod helm_chart;
mod helm_cli;
mod helm_cluster_reads;
mod helm_day_two;
mod helm_deployer;
mod hooks;
mod http_api;
mod image;
mod image_in_podman;
mod item_cache;
mod kubectl_events;
mod landscaper_suite;
mod least_privilege;
mod locking;
mod manifest_e2e;
mod manifest_features;
mod manifest_secondary_targets;
mod mock_deployer;
mod monitoring;
mod multiarch;
mod native_deployer;
mod ocm;
mod plugin_cli;
mod plugin_delivery;
mod polyglot_plugins;
mod private_registries;
mod progressing_timeout;
mod real_backend;
mod real_landscaper;
mod real_landscaper_dlm;
mod real_landscaper_reliability;
mod reliability;
mod target_clusters;
