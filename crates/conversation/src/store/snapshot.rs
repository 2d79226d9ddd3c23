//! The one read transaction: a snapshot for reads that must agree with each other. Every
//! write goes through the writer (`writes.rs`); this is the only other place that opens a
//! transaction, and it never writes.

use sea_orm::{AccessMode, IsolationLevel, TransactionTrait};

use super::*;

impl Store {
    /// A read-only transaction whose reads all see the database as of its first one: a
    /// prompt's row and its journal read through it agree. SQLite (WAL) gives a deferred
    /// transaction that snapshot by itself; PostgreSQL needs `REPEATABLE READ`.
    pub(crate) async fn snapshot(&self) -> anyhow::Result<DatabaseTransaction> {
        let options = match self.db.get_database_backend() {
            DbBackend::Postgres => TransactionOptions {
                isolation_level: Some(IsolationLevel::RepeatableRead),
                access_mode: Some(AccessMode::ReadOnly),
                ..TransactionOptions::default()
            },
            _ => TransactionOptions::default(),
        };
        self.db
            .begin_with_options(options)
            .await
            .context("could not start a read transaction")
    }
}
