//! Unit tests of the fs plugin: confinement, listing and search.
use super::*;

fn root() -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("root/docs")).unwrap();
    std::fs::write(dir.path().join("root/docs/a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "top secret").unwrap();
    let root = Root::new(dir.path().join("root"));
    (dir, root)
}

#[tokio::test]
async fn paths_that_leave_the_root_are_refused() {
    let (dir, root) = root();
    for bad in [
        "../secret.txt",
        "docs/../../secret.txt",
        "/etc/passwd",
        "~/x",
    ] {
        let error = Root::relative_path(bad).unwrap_err().to_string();
        assert!(error.contains("root"), "{bad}: {error}");
        let error = root.read(bad, 0, 100).await.unwrap_err().to_string();
        assert!(error.contains("root"), "{bad}: {error}");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), dir.path().join("root/link"))
            .unwrap();
        std::os::unix::fs::symlink(dir.path(), dir.path().join("root/up")).unwrap();
        for bad in ["link", "up/secret.txt"] {
            let error = root.read(bad, 0, 100).await.unwrap_err().to_string();
            assert!(error.contains("leads out of the root"), "{bad}: {error}");
        }
        for bad in ["link", "up/new.txt"] {
            let error = root.write(bad, "x", false).await.unwrap_err().to_string();
            assert!(error.contains("leads out of the root"), "{bad}: {error}");
        }
        let error = root.list(Some("up"), false).await.unwrap_err().to_string();
        assert!(error.contains("root"), "{error}");
        assert!(!dir.path().join("new.txt").exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("secret.txt")).unwrap(),
            "top secret"
        );
    }
    assert!(root.read("docs/a.txt", 0, 100).await.is_ok());
    assert!(
        root.write("./docs/new/deeper.txt", "x", false)
            .await
            .is_ok()
    );
}

/// With `perUser`, a user's directory that is a symbolic link (to another user's
/// directory, or out of the root) is not followed: the user's directory is opened beneath
/// the configured root's handle, not by its path.
#[cfg(unix)]
#[tokio::test]
async fn a_users_directory_that_is_a_link_leads_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("users");
    std::fs::create_dir_all(base.join("bob")).unwrap();
    std::fs::write(base.join("bob/secret.txt"), "bob's").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(base.join("bob"), base.join("mallory")).unwrap();
    std::os::unix::fs::symlink(dir.path(), base.join("eve")).unwrap();
    let config = FsConfig {
        root: Some(base.clone()),
        per_user: true,
        ..FsConfig::default()
    };
    for user in ["mallory", "eve"] {
        let root = Root::for_user(&config, user).unwrap();
        let error = root
            .read("secret.txt", 0, 100)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("leads out of the root"), "{user}: {error}");
        let error = root
            .write("new.txt", "x", false)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("leads out of the root"), "{user}: {error}");
        assert!(root.list(None, true).await.is_err(), "{user}");
    }
    assert!(!base.join("bob/new.txt").exists());
    assert!(!dir.path().join("new.txt").exists());
    let bob = Root::for_user(&config, "bob").unwrap();
    assert_eq!(
        bob.read("secret.txt", 0, 100).await.unwrap().content,
        "bob's"
    );
    let fresh = Root::for_user(&config, "carol").unwrap();
    fresh.write("a.txt", "carol's", false).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(base.join("carol/a.txt")).unwrap(),
        "carol's"
    );
}

/// A directory swapped for a link to outside the root, over and over, while files under
/// it are read and written: no read ever sees the outside file and no write lands there.
/// Checking a path and then opening it (as this plugin once did) loses this race.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_swapped_in_during_an_operation_never_leads_out() {
    let (dir, root) = root();
    std::fs::create_dir_all(dir.path().join("outside")).unwrap();
    std::fs::write(dir.path().join("outside/file.txt"), "outside").unwrap();
    let inside = dir.path().join("root/swap");
    let outside = dir.path().join("outside");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, inside, outside) = (stop.clone(), inside.clone(), outside.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Only this thread makes `swap` a link, so it knows which it is.
                let _ = std::fs::create_dir(&inside);
                let _ = std::fs::write(inside.join("file.txt"), "inside");
                let _ = std::fs::remove_dir_all(&inside);
                let _ = std::os::unix::fs::symlink(&outside, &inside);
                if std::fs::symlink_metadata(&inside).is_ok_and(|m| m.is_symlink()) {
                    let _ = std::fs::remove_file(&inside);
                }
            }
        })
    };
    let mut inside_reads = 0;
    for _ in 0..3000 {
        if let Ok(read) = root.read("swap/file.txt", 0, 100).await {
            // Empty while the swapper writes it; never the outside file.
            assert_ne!(read.content, "outside", "a read left the root");
            if read.content == "inside" {
                inside_reads += 1;
            }
        }
        let _ = root.write("swap/written.txt", "x", false).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        !dir.path().join("outside/written.txt").exists(),
        "a write left the root"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("outside/file.txt")).unwrap(),
        "outside"
    );
    // The race was run, not skipped: some reads found the real directory.
    assert!(inside_reads > 0);
}

/// Seen with Qwen2.5-Coder-1.5B (eval, big-payments-artifact): `fs.list({ path:
/// "payments" })` for a file `payments.csv`. The error names what is there.
#[tokio::test]
async fn listing_a_missing_directory_names_what_its_parent_holds() {
    let (dir, root) = root();
    std::fs::write(dir.path().join("root/payments.csv"), "id,amount\n").unwrap();
    let missing = root
        .list(Some("payments"), false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        missing.starts_with("cannot list \"payments\": ")
            && missing.ends_with("; the root holds: docs/, payments.csv"),
        "{missing}"
    );
    let deeper = root
        .list(Some("docs/x/y"), true)
        .await
        .unwrap_err()
        .to_string();
    assert!(deeper.ends_with("; \"docs\" holds: a.txt"), "{deeper}");
}

/// Seen with Qwen2.5-Coder-1.5B (eval, csv-sum, tuning split): `fs.list({ path:
/// "timesheet.csv" })`, four times over, on "is not a directory". The error says how to
/// read it.
#[tokio::test]
async fn listing_a_file_says_how_to_read_it() {
    let (_dir, root) = root();
    let error = root
        .list(Some("docs/a.txt"), false)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "\"docs/a.txt\" is a file (11 bytes), not a folder: fs.read({ path: \"docs/a.txt\" }) \
         gives its content"
    );
}

#[tokio::test]
async fn reads_are_capped_and_say_so() {
    let (_dir, root) = root();
    let whole = root.read("docs/a.txt", 0, 100).await.unwrap();
    assert_eq!(whole.content, "alpha\nbeta\n");
    assert!(!whole.truncated);
    let cut = root.read("docs/a.txt", 0, 4).await.unwrap();
    assert_eq!(cut.content, "alph");
    assert!(cut.truncated);
    assert_eq!(cut.next_offset, Some(4));
    let rest = root.read("docs/a.txt", 4, 100).await.unwrap();
    assert_eq!(rest.content, "a\nbeta\n");
    let missing = root.read("docs/none.txt", 0, 10).await.unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("cannot read \"docs/none.txt\"")
    );
    assert!(missing.to_string().contains("no file of that name"));
}

/// A file named without its directory: the error names where files of that name are.
#[tokio::test]
async fn a_missing_file_names_files_of_the_same_name() {
    let (_dir, root) = root();
    root.write("reports/2026/Report.txt", "net: 1\n", false)
        .await
        .unwrap();
    let one = root
        .read("report.txt", 0, 10)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        one.ends_with("; a file of that name is at \"reports/2026/Report.txt\""),
        "{one}"
    );
    for year in ["2023", "2024", "2025"] {
        root.write(&format!("reports/{year}/report.txt"), "", false)
            .await
            .unwrap();
    }
    let many = root
        .read("report.txt", 0, 10)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        many.ends_with(
            "; files of that name are at \"reports/2023/report.txt\", \
             \"reports/2024/report.txt\", \"reports/2025/report.txt\" and 1 more"
        ),
        "{many}"
    );
}

#[tokio::test]
async fn writes_create_directories_and_append() {
    let (_dir, root) = root();
    root.write("new/dir/b.txt", "one\n", false).await.unwrap();
    root.write("new/dir/b.txt", "two\n", true).await.unwrap();
    let read = root.read("new/dir/b.txt", 0, 100).await.unwrap();
    assert_eq!(read.content, "one\ntwo\n");
    assert!(
        root.write("docs", "x", false)
            .await
            .unwrap_err()
            .to_string()
            .contains("directory")
    );
    assert!(root.write("../escape.txt", "x", false).await.is_err());
}

#[tokio::test]
async fn lists_and_searches() {
    let (_dir, root) = root();
    root.write("docs/b.md", "Beta release notes\n", false)
        .await
        .unwrap();
    let listing = root.list(None, true).await.unwrap();
    let paths: Vec<&str> = listing
        .entries
        .iter()
        .map(|entry| entry.path.as_str())
        .collect();
    assert_eq!(paths, ["docs", "docs/a.txt", "docs/b.md"]);
    let found = root
        .search(SearchInput {
            name: None,
            content: Some("BETA".into()),
            path: None,
        })
        .await
        .unwrap();
    let lines: Vec<(String, Option<usize>)> = found
        .matches
        .iter()
        .map(|m| (m.path.clone(), m.line))
        .collect();
    assert_eq!(
        lines,
        [
            ("docs/a.txt".to_owned(), Some(2)),
            ("docs/b.md".to_owned(), Some(1))
        ]
    );
    let by_name = root
        .search(SearchInput {
            name: Some(".md".into()),
            content: None,
            path: None,
        })
        .await
        .unwrap();
    assert_eq!(by_name.matches.len(), 1);
    assert!(
        root.search(SearchInput {
            name: None,
            content: None,
            path: None
        })
        .await
        .is_err()
    );
}

#[test]
fn per_user_roots_are_plain_directory_names() {
    let config = FsConfig {
        root: Some("/srv/files".into()),
        per_user: true,
        ..FsConfig::default()
    };
    let root = Root::for_user(&config, "alice@example.com").unwrap();
    assert_eq!(root.base, PathBuf::from("/srv/files"));
    assert_eq!(root.user.as_deref(), Some("alice@example.com"));
    let root = Root::for_user(&config, "../../etc").unwrap();
    assert_eq!(root.user.as_deref(), Some("%2e.%2f..%2fetc"));
    for (id, name) in [
        (".", "%2e"),
        ("..", "%2e."),
        ("mallory+x", "mallory%2bx"),
        ("mallory:x", "mallory%3ax"),
        ("mallory_x", "mallory_x"),
        ("mallory%3ax", "mallory%253ax"),
        ("Alice", "%41lice"),
        ("", "%"),
    ] {
        assert_eq!(user_directory_name(id), name, "{id:?}");
    }
}

/// No two user ids share a directory: every id of up to three characters from the API's
/// alphabet (and a few beyond it) gets its own name, and none is a special path.
#[test]
fn user_directory_names_are_injective() {
    let alphabet: Vec<char> = "aAz09_-.@:+/ \\é%".chars().collect();
    let mut ids = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for prefix in &frontier {
            for c in &alphabet {
                next.push(format!("{prefix}{c}"));
            }
        }
        ids.extend(next.iter().cloned());
        frontier = next;
    }
    let mut seen = std::collections::HashMap::new();
    for id in &ids {
        let name = user_directory_name(id);
        assert!(!name.contains(['/', '\\', '\0']), "{id:?} -> {name:?}");
        assert!(!name.starts_with('.'), "{id:?} -> {name:?}");
        if let Some(other) = seen.insert(name.clone(), id.clone()) {
            panic!("{other:?} and {id:?} both map to {name:?}");
        }
    }
    assert_eq!(seen.len(), ids.len());
}
