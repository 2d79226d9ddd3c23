//! What a path that is not there could have meant: the hints a "no such file" error carries
//! (where files of that name are, what the nearest existing folder holds).

use std::path::Path;

use cap_std::fs::Dir;

use crate::list_beneath;

/// Most files named in a "no such file" error's suggestion.
const MAX_SUGGESTED: usize = 3;

/// For a read of a missing file: where files of the same name are under the root (`; a file
/// of that name is at reports/2026/report.txt`), or how to look for one. Models and users
/// often name a file without its directory; the error names the candidates and reads none.
/// For a directory that is not there: what its nearest existing parent holds, e.g.
/// `; the root holds: notes/, payments.csv`. Empty when that cannot be listed.
pub(crate) fn what_the_parent_holds(root: &Dir, missing: &Path) -> String {
    let mut parent = missing.parent();
    while let Some(candidate) = parent {
        if candidate.as_os_str().is_empty() || root.is_dir(candidate) {
            break;
        }
        parent = candidate.parent();
    }
    let parent = parent.unwrap_or(Path::new(""));
    let Ok(listing) = list_beneath(root, parent, ".", false) else {
        return String::new();
    };
    let where_ = if parent.as_os_str().is_empty() {
        "the root".to_owned()
    } else {
        format!("\"{}\"", parent.display())
    };
    if listing.entries.is_empty() {
        return format!("; {where_} is empty");
    }
    let names: Vec<String> = listing
        .entries
        .iter()
        .take(MAX_LISTED_ON_MISS)
        .map(|entry| {
            let name = entry.path.rsplit('/').next().unwrap_or(&entry.path);
            if entry.kind == "dir" {
                format!("{name}/")
            } else {
                name.to_owned()
            }
        })
        .collect();
    let more = listing.entries.len().saturating_sub(MAX_LISTED_ON_MISS);
    let more = if more > 0 || listing.truncated {
        " and more".to_owned()
    } else {
        String::new()
    };
    format!("; {where_} holds: {}{more}", names.join(", "))
}

/// Entries named when a directory to list is not there.
const MAX_LISTED_ON_MISS: usize = 20;

pub(crate) fn same_name_elsewhere(root: &Dir, missing: &Path) -> String {
    let Some(name) = missing
        .file_name()
        .map(|name| name.to_string_lossy().to_lowercase())
    else {
        return String::new();
    };
    let Ok(listing) = list_beneath(root, Path::new(""), ".", true) else {
        return String::new();
    };
    let found: Vec<&str> = listing
        .entries
        .iter()
        .filter(|entry| entry.kind == "file")
        .filter(|entry| {
            entry
                .path
                .rsplit('/')
                .next()
                .is_some_and(|file| file.to_lowercase() == name)
        })
        .map(|entry| entry.path.as_str())
        .collect();
    match found.as_slice() {
        [] => "; no file of that name is under the root. fs.list({ path: \".\", recursive: \
               true }) shows what is there"
            .to_owned(),
        [one] => format!("; a file of that name is at \"{one}\""),
        many => {
            let shown: Vec<String> = many
                .iter()
                .take(MAX_SUGGESTED)
                .map(|path| format!("\"{path}\""))
                .collect();
            let more = if many.len() > MAX_SUGGESTED {
                format!(" and {} more", many.len() - MAX_SUGGESTED)
            } else {
                String::new()
            };
            format!("; files of that name are at {}{more}", shown.join(", "))
        }
    }
}
