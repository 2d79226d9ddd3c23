//! What plugins register during `setup()` for this crate to use later (migrations, hooks,
//! background services): a list kept in the runtime's extensions.

use std::sync::{Mutex, PoisonError};

/// Items in registration order.
pub struct Registry<T> {
    items: Mutex<Vec<T>>,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Self {
            items: Mutex::default(),
        }
    }
}

impl<T> std::fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("len", &self.lock().len())
            .finish()
    }
}

impl<T> Registry<T> {
    pub fn push(&self, item: T) {
        self.lock().push(item);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        self.items.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Clone> Registry<T> {
    /// A copy of the items, in registration order.
    pub fn list(&self) -> Vec<T> {
        self.lock().clone()
    }
}
