//! State carried between the prompts of a conversation, readable and writable by tools.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};

/// A shared JSON object. Clones share the same map.
#[derive(Debug, Clone, Default)]
pub struct State {
    values: Arc<Mutex<Map<String, Value>>>,
}

impl State {
    /// A state holding `values`.
    pub fn from_map(values: Map<String, Value>) -> Self {
        Self {
            values: Arc::new(Mutex::new(values)),
        }
    }

    /// A copy of the value at `key`.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.lock().get(key).cloned()
    }

    /// Sets `key` to `value`; every clone sees it.
    pub fn set(&self, key: &str, value: Value) {
        self.lock().insert(key.to_owned(), value);
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: &str) -> Option<Value> {
        self.lock().remove(key)
    }

    /// A copy of every value, e.g. to persist it.
    pub fn snapshot(&self) -> Map<String, Value> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Map<String, Value>> {
        self.values.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
