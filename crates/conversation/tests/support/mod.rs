//! Databases and runtimes for the conversation tests. Every test runs once on a SQLite file
//! in a temporary directory and once on a fresh database of the PostgreSQL server named by
//! `AGENTIC_TEST_POSTGRES_URL` (which `.ci/run` always sets, with `AGENTIC_REQUIRE_POSTGRES`;
//! locally the PostgreSQL run is skipped when it is unset).
#![allow(dead_code)]

use std::sync::Arc;

use agentic_conversation::{ConversationService, Store};
use agentic_core::{Config, Plugin, Runtime};
use agentic_plugin_script::ScriptedProvider;

pub(crate) use agentic_testing::TestDatabase as TestDb;

/// A SQLite file, then (when configured) a new PostgreSQL database.
pub(crate) async fn databases() -> Vec<TestDb> {
    agentic_testing::test_databases().await.unwrap()
}

pub(crate) fn kit_config(extra: serde_json::Value) -> Config {
    let mut root = serde_json::json!({
        "interpreter": { "sandbox": { "backend": "in-process" } }
    });
    if let (Some(root), serde_json::Value::Object(extra)) = (root.as_object_mut(), extra) {
        root.extend(extra);
    }
    Config::from_value(root)
}

/// A runtime with the kit tools, code mode and a scripted model.
pub(crate) async fn runtime(turns: &str, config: Config) -> (Arc<Runtime>, Arc<ScriptedProvider>) {
    runtime_with_plugins(turns, config, Vec::new()).await
}

/// [`runtime`] with more plugins, e.g. one defined in a test.
pub(crate) async fn runtime_with_plugins(
    turns: &str,
    config: Config,
    plugins: Vec<Arc<dyn Plugin>>,
) -> (Arc<Runtime>, Arc<ScriptedProvider>) {
    let provider = Arc::new(ScriptedProvider::from_yaml(turns).unwrap());
    let mut builder = Runtime::builder()
        .config(config)
        .plugin(agentic_testing::kit::plugin())
        .plugin(Arc::new(agentic_interpreter::InterpreterPlugin::default()));
    for plugin in plugins {
        builder = builder.plugin(plugin);
    }
    let runtime = builder.provider(provider.clone()).build().await.unwrap();
    (Arc::new(runtime), provider)
}

pub(crate) async fn service(
    db: &TestDb,
    turns: &str,
) -> (ConversationService, Arc<ScriptedProvider>) {
    service_with(db, turns, kit_config(serde_json::json!({}))).await
}

pub(crate) async fn service_with(
    db: &TestDb,
    turns: &str,
    config: Config,
) -> (ConversationService, Arc<ScriptedProvider>) {
    let (runtime, provider) = runtime(turns, config).await;
    let service = ConversationService::open(runtime, &db.url).await.unwrap();
    (service, provider)
}

pub(crate) async fn store(db: &TestDb) -> Store {
    Store::connect(&db.url).await.unwrap()
}
