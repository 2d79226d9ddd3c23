//! Databases for tests, ours and those of plugins that keep tables: every such test runs once
//! on a SQLite file in a temporary directory and once on a fresh database of the PostgreSQL
//! server named by `AGENTIC_TEST_POSTGRES_URL` (which `.ci/run` always sets, together with
//! `AGENTIC_REQUIRE_POSTGRES`; locally the PostgreSQL run is skipped when it is unset).

use anyhow::Context;
use sea_orm::{ConnectionTrait, Database};

/// One database a test runs on, removed when this value is dropped: a SQLite file's
/// directory, or a PostgreSQL database (dropped through the admin URL it was made with).
#[derive(Debug)]
pub struct TestDatabase {
    /// `sqlite` or `postgres`, for assertion messages.
    pub name: &'static str,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    /// The admin URL and the database's name, for a PostgreSQL database.
    postgres: Option<(String, String)>,
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some((admin_url, name)) = self.postgres.take() else {
            return;
        };
        // Drop is not async, and may run inside a runtime: a thread of its own with a runtime
        // of its own. `WITH (FORCE)` ends connections a pool still holds.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let admin = Database::connect(&admin_url).await?;
                admin
                    .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await?;
                admin.close().await?;
                anyhow::Ok(())
            })
        })
        .join();
        if let Ok(Err(error)) = dropped {
            eprintln!("could not drop a test database: {error:#}");
        }
    }
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
            url: agentic_conversation::store::sqlite_url(&dir.path().join("agentic.db")),
            _dir: Some(dir),
            postgres: None,
        })
    }
}

/// A SQLite file, then (when `AGENTIC_TEST_POSTGRES_URL` is set) a new PostgreSQL database.
/// Fails when `AGENTIC_REQUIRE_POSTGRES` is set without a server to use.
pub async fn test_databases() -> anyhow::Result<Vec<TestDatabase>> {
    let mut all = vec![TestDatabase::sqlite()?];
    match std::env::var("AGENTIC_TEST_POSTGRES_URL") {
        Ok(admin) if !admin.is_empty() => all.push(postgres_database(&admin).await?),
        _ => crate::Requirement::Postgres.missing(
            "AGENTIC_TEST_POSTGRES_URL is unset: no PostgreSQL run (bash .ci/postgres.sh)",
        ),
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
        postgres: Some((admin_url.to_owned(), name)),
    })
}
