//! Databases and runtimes for the conversation tests. Every test runs once on a SQLite file
//! in a temporary directory and once on a fresh database of the PostgreSQL server named by
//! `AGENTIC_TEST_POSTGRES_URL` (which `.ci/run` always sets, with `AGENTIC_REQUIRE_POSTGRES`;
//! locally the PostgreSQL run is skipped when it is unset).
#![allow(dead_code)]

use std::sync::Arc;

use agentic_conversation::{ConversationService, Store};
use agentic_core::{Config, Plugin, Runtime};
use agentic_plugin_script::ScriptedProvider;
use sea_orm::{ConnectionTrait, Database};

pub struct TestDb {
    pub name: &'static str,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub fn is_sqlite(&self) -> bool {
        self.url.starts_with("sqlite:")
    }
}

/// A SQLite file, then (when configured) a new PostgreSQL database.
pub async fn databases() -> Vec<TestDb> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentic.db");
    let mut all = vec![TestDb {
        name: "sqlite",
        url: agentic_conversation::sqlite_url(&path),
        _dir: Some(dir),
    }];
    match std::env::var("AGENTIC_TEST_POSTGRES_URL") {
        Ok(admin) if !admin.is_empty() => all.push(postgres_database(&admin).await),
        _ => {
            assert!(
                std::env::var_os("AGENTIC_REQUIRE_POSTGRES").is_none(),
                "AGENTIC_REQUIRE_POSTGRES is set (as .ci/run sets it) but \
                 AGENTIC_TEST_POSTGRES_URL is not: the PostgreSQL run cannot be skipped"
            );
            eprintln!("AGENTIC_TEST_POSTGRES_URL is unset: skipping the PostgreSQL run");
        }
    }
    all
}

async fn postgres_database(admin_url: &str) -> TestDb {
    let admin = Database::connect(admin_url).await.unwrap();
    let name = format!("agentic_test_{}", uuid::Uuid::new_v4().simple());
    admin
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    admin.close().await.unwrap();
    let (base, _) = admin_url.rsplit_once('/').unwrap();
    TestDb {
        name: "postgres",
        url: format!("{base}/{name}"),
        _dir: None,
    }
}

pub fn kit_config(extra: serde_json::Value) -> Config {
    let mut root = serde_json::json!({
        "interpreter": { "sandbox": { "backend": "in-process" } }
    });
    if let (Some(root), serde_json::Value::Object(extra)) = (root.as_object_mut(), extra) {
        root.extend(extra);
    }
    Config::from_value(root)
}

/// A runtime with the kit tools, code mode and a scripted model.
pub async fn runtime(turns: &str, config: Config) -> (Arc<Runtime>, Arc<ScriptedProvider>) {
    runtime_with_plugins(turns, config, Vec::new()).await
}

/// [`runtime`] with more plugins, e.g. one defined in a test.
pub async fn runtime_with_plugins(
    turns: &str,
    config: Config,
    plugins: Vec<Arc<dyn Plugin>>,
) -> (Arc<Runtime>, Arc<ScriptedProvider>) {
    let provider = Arc::new(ScriptedProvider::from_yaml(turns).unwrap());
    let mut builder = Runtime::builder()
        .config(config)
        .plugin(agentic_plugin_script::testing::kit::plugin())
        .plugin(Arc::new(agentic_interpreter::InterpreterPlugin::default()));
    for plugin in plugins {
        builder = builder.plugin(plugin);
    }
    let runtime = builder.provider(provider.clone()).build().await.unwrap();
    (Arc::new(runtime), provider)
}

pub async fn service(db: &TestDb, turns: &str) -> (ConversationService, Arc<ScriptedProvider>) {
    service_with(db, turns, kit_config(serde_json::json!({}))).await
}

pub async fn service_with(
    db: &TestDb,
    turns: &str,
    config: Config,
) -> (ConversationService, Arc<ScriptedProvider>) {
    let (runtime, provider) = runtime(turns, config).await;
    let service = ConversationService::open(runtime, &db.url).await.unwrap();
    (service, provider)
}

pub async fn store(db: &TestDb) -> Store {
    Store::connect(&db.url).await.unwrap()
}
