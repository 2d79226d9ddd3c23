//! Instances: this process registered as a user of the database, its lease and heartbeat,
//! and how one server judges whether another is still alive.

use super::*;

impl Store {
    /// Records this process as a user of the database; prompts it runs carry its id.
    pub async fn register_instance(&self) -> anyhow::Result<String> {
        if let Some(id) = self.instance_id.get() {
            return Ok(id.clone());
        }
        let id = uuid::Uuid::new_v4().to_string();
        let now = Utc::now();
        self.write(Write::RegisterInstance(instance::Model {
            id: id.clone(),
            host: host_name(),
            pid: i64::from(std::process::id()),
            started_at: now,
            last_seen: now,
        }))
        .await?;
        Ok(self.instance_id.get_or_init(|| id).clone())
    }

    /// How long an instance on another host counts as alive after its last heartbeat.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Sets [`Store::lease`] (every server on a database should use the same).
    pub fn set_lease(&self, lease: Duration) {
        self.lease_ms
            .store(lease_ms(lease), std::sync::atomic::Ordering::Relaxed);
    }

    pub fn instance_id(&self) -> Option<&str> {
        self.instance_id.get().map(String::as_str)
    }

    /// Renews this process's lease.
    pub async fn heartbeat(&self) -> anyhow::Result<()> {
        let Some(id) = self.instance_id() else {
            return Ok(());
        };
        let renewed = self
            .write(Write::Heartbeat {
                instance: id.to_owned(),
            })
            .await?;
        if matches!(renewed, Written::Count(0)) {
            // Another process took us for dead (e.g. the database was out of reach for longer
            // than the lease) and swept our row: come back.
            tracing::warn!("this process's instance row was gone; registering again");
            let now = Utc::now();
            self.write(Write::RegisterInstance(instance::Model {
                id: id.to_owned(),
                host: host_name(),
                pid: i64::from(std::process::id()),
                started_at: now,
                last_seen: now,
            }))
            .await?;
        }
        Ok(())
    }

    /// Removes this process's row, e.g. at a clean shutdown.
    pub async fn unregister_instance(&self) -> anyhow::Result<()> {
        let Some(id) = self.instance_id() else {
            return Ok(());
        };
        self.write(Write::DeleteInstances {
            ids: vec![id.to_owned()],
        })
        .await?;
        Ok(())
    }

    /// Instances still alive: this one, and those that renewed their lease lately — on this
    /// host only if their process also still exists (so a killed process is found dead at
    /// once, and a reused pid is found dead when its lease runs out). Rows of the others are
    /// deleted.
    pub(crate) async fn live_instances(&self) -> anyhow::Result<HashSet<String>> {
        let host = host_name();
        let cutoff = Utc::now() - chrono::Duration::from_std(self.lease())?;
        let mut live = HashSet::new();
        let mut dead = Vec::new();
        for row in instance::Entity::find().all(&self.db).await? {
            let alive = if Some(row.id.as_str()) == self.instance_id() {
                true
            } else if row.host == host && can_see_processes() {
                row.last_seen > cutoff && u32::try_from(row.pid).is_ok_and(process_exists)
            } else {
                row.last_seen > cutoff
            };
            if alive {
                live.insert(row.id);
            } else {
                dead.push(row.id);
            }
        }
        if !dead.is_empty() {
            self.write(Write::DeleteInstances { ids: dead }).await?;
        }
        Ok(live)
    }
}

pub(super) fn lease_ms(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)
}

/// The host an instance row names. Servers that name the same host judge each other by
/// process id; others by lease. `AGENTIC_INSTANCE_HOST` overrides the system's host name,
/// for hosts whose names are not unique (or to try the lease path on one machine).
fn host_name() -> String {
    std::env::var("AGENTIC_INSTANCE_HOST")
        .ok()
        .filter(|name| !name.trim().is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Whether this system shows processes under `/proc` (Linux); elsewhere leases decide.
fn can_see_processes() -> bool {
    Path::new("/proc/self").exists()
}

fn process_exists(pid: u32) -> bool {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    match std::fs::read_to_string(path) {
        // A zombie has exited; it only waits for its parent to notice.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}
