//! Tool ids are dotted (`time.now`) but providers accept only names matching
//! `^[a-zA-Z0-9_-]{1,64}$`. This maps ids to wire names and back, without collisions.

use std::collections::{BTreeSet, HashMap};

use agentic_core::provider::{MAX_TOOL_NAME as MAX_NAME, wire_tool_name};

/// A two-way map between tool ids and wire names, for one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolNameMap {
    to_wire: HashMap<String, String>,
    to_id: HashMap<String, String>,
}

impl ToolNameMap {
    /// Builds the map for these ids. Ids are taken in sorted order so the same set always
    /// maps the same way.
    pub fn new<'a>(ids: impl IntoIterator<Item = &'a str>) -> Self {
        let ids: BTreeSet<&str> = ids.into_iter().collect();
        let mut map = Self::default();
        for id in ids {
            let base = wire_tool_name(id);
            let mut candidate = base.clone();
            let mut counter = 2;
            while map.to_id.contains_key(&candidate) {
                let suffix = format!("_{counter}");
                let keep = MAX_NAME - suffix.len();
                candidate = format!("{}{suffix}", truncate(&base, keep));
                counter += 1;
            }
            map.to_wire.insert(id.to_owned(), candidate.clone());
            map.to_id.insert(candidate, id.to_owned());
        }
        map
    }

    /// The map for every tool a request mentions: those offered and those called in its
    /// history.
    pub fn for_request(request: &agentic_core::ModelRequest) -> Self {
        let offered = request.tools.iter().map(|tool| tool.name.as_str());
        let called = request
            .messages
            .iter()
            .flat_map(|message| message.tool_calls.iter().map(|call| call.name.as_str()));
        Self::new(offered.chain(called))
    }

    /// The wire name of an id (ids outside the map are converted on the fly).
    pub fn wire_name(&self, id: &str) -> String {
        self.to_wire
            .get(id)
            .cloned()
            .unwrap_or_else(|| wire_tool_name(id))
    }

    /// The id a wire name stands for; unknown names come back unchanged so the executor can
    /// report an unknown tool.
    pub fn tool_id(&self, wire_name: &str) -> String {
        self.to_id
            .get(wire_name)
            .cloned()
            .unwrap_or_else(|| wire_name.to_owned())
    }
}

fn truncate(text: &str, max: usize) -> &str {
    // Every character is ASCII after sanitizing, so byte and char counts agree.
    &text[..text.len().min(max)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn dotted_ids_become_valid_names_and_map_back() {
        let map = ToolNameMap::new(["time.now", "trigger.create"]);
        assert_eq!(map.wire_name("time.now"), "time_now");
        assert_eq!(map.tool_id("time_now"), "time.now");
        assert_eq!(map.tool_id("trigger_create"), "trigger.create");
    }

    #[test]
    fn colliding_ids_get_distinct_names() {
        let map = ToolNameMap::new(["a.b", "a_b", "a-b", "a.b.c"]);
        let names: BTreeSet<String> = ["a.b", "a_b", "a-b", "a.b.c"]
            .iter()
            .map(|id| map.wire_name(id))
            .collect();
        assert_eq!(names.len(), 4);
        for id in ["a.b", "a_b", "a-b", "a.b.c"] {
            assert_eq!(map.tool_id(&map.wire_name(id)), id);
        }
    }

    #[test]
    fn long_and_odd_ids_stay_within_the_pattern() {
        let long_a = format!("{}.x", "p".repeat(80));
        let long_b = format!("{}.y", "p".repeat(80));
        let map = ToolNameMap::new([long_a.as_str(), long_b.as_str(), "émoji.🙂", ""]);
        for id in [long_a.as_str(), long_b.as_str(), "émoji.🙂", ""] {
            let wire = map.wire_name(id);
            assert!(valid(&wire), "{wire:?} is not a valid name");
            assert_eq!(map.tool_id(&wire), id);
        }
        assert_ne!(map.wire_name(&long_a), map.wire_name(&long_b));
    }
}
