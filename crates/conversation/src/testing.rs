//! Databases for tests, ours and those of plugins that keep tables: every such test runs once
//! on a SQLite file in a temporary directory and once on a fresh database of the PostgreSQL
//! server named by `AGENTIC_TEST_POSTGRES_URL` (which `.ci/run` always sets, together with
//! `AGENTIC_REQUIRE_POSTGRES`; locally the PostgreSQL run is skipped when it is unset).

use agentic_core::Services;
use anyhow::Context;
use sea_orm::{ConnectionTrait, Database};

/// One database a test runs on; a SQLite file lives as long as this value.
#[derive(Debug)]
pub struct TestDatabase {
    /// `sqlite` or `postgres`, for assertion messages.
    pub name: &'static str,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDatabase {
    pub fn is_sqlite(&self) -> bool {
        self.url.starts_with("sqlite:")
    }

    /// A SQLite file in a new temporary directory.
    pub fn sqlite() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        Ok(Self {
            name: "sqlite",
            url: crate::sqlite_url(&dir.path().join("agentic.db")),
            _dir: Some(dir),
        })
    }
}

/// A SQLite file, then (when `AGENTIC_TEST_POSTGRES_URL` is set) a new PostgreSQL database.
/// Fails when `AGENTIC_REQUIRE_POSTGRES` is set without a server to use.
pub async fn test_databases() -> anyhow::Result<Vec<TestDatabase>> {
    let mut all = vec![TestDatabase::sqlite()?];
    match std::env::var("AGENTIC_TEST_POSTGRES_URL") {
        Ok(admin) if !admin.is_empty() => all.push(postgres_database(&admin).await?),
        _ => {
            anyhow::ensure!(
                std::env::var_os("AGENTIC_REQUIRE_POSTGRES").is_none(),
                "AGENTIC_REQUIRE_POSTGRES is set (as .ci/run sets it) but \
                 AGENTIC_TEST_POSTGRES_URL is not: the PostgreSQL run cannot be skipped"
            );
            eprintln!("AGENTIC_TEST_POSTGRES_URL is unset: skipping the PostgreSQL run");
        }
    }
    Ok(all)
}

async fn postgres_database(admin_url: &str) -> anyhow::Result<TestDatabase> {
    let admin = Database::connect(admin_url)
        .await
        .context("could not connect to AGENTIC_TEST_POSTGRES_URL")?;
    let name = format!("agentic_test_{}", uuid::Uuid::new_v4().simple());
    admin
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await?;
    admin.close().await?;
    let (base, _) = admin_url
        .rsplit_once('/')
        .context("AGENTIC_TEST_POSTGRES_URL names no database")?;
    Ok(TestDatabase {
        name: "postgres",
        url: format!("{base}/{name}"),
        _dir: None,
    })
}

/// Opens a SQLite file in a temporary directory (kept until the process ends) as the
/// database of `services`: the runtime hook of timeline tests for plugins that keep tables.
pub async fn attach_temporary_sqlite(services: std::sync::Arc<Services>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?.keep();
    crate::attach_database(&services, &crate::sqlite_url(&dir.join("agentic.db"))).await?;
    Ok(())
}
