//! The filesystem plugin: `fs.read`, `fs.write` (needs approval), `fs.list` and `fs.search`,
//! all confined to one root directory.
//!
//! Paths are relative to the root. Absolute paths, `..` components and symlinks that lead out
//! of the root are refused: every file is opened beneath a handle on the root (cap-std's
//! `Dir`), so nothing can race a check. Config (`[fs]`): `root` (default: the current directory),
//! `perUser` (each user gets a directory of their own under the root, named by
//! [`user_directory_name`]; what `agentic serve` uses), `maxReadBytes`.
#![forbid(unsafe_code)]

use std::io::{Read as _, Write as _};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

use agentic_core::{
    Plugin, PluginRegistration, PrepareContext, SetupContext, ToolError, define_tool,
};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod missing;
use missing::{same_name_elsewhere, what_the_parent_holds};

agentic_core::inventory::submit! {
    PluginRegistration { id: "fs", create: create_plugin }
}

fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(FsPlugin::default())
}

/// Most entries `fs.list` and `fs.search` return.
const MAX_ENTRIES: usize = 500;
/// Largest file `fs.search` reads for content.
const MAX_SEARCH_FILE_BYTES: u64 = 1024 * 1024;

/// The `fs` config section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct FsConfig {
    /// The directory every path is relative to; the current directory when absent.
    pub root: Option<PathBuf>,
    /// Give each user their own directory under the root.
    pub per_user: bool,
    /// Bytes `fs.read` returns at most; a longer read is cut and says so.
    pub max_read_bytes: usize,
}

impl Default for FsConfig {
    fn default() -> Self {
        Self {
            root: None,
            per_user: false,
            max_read_bytes: 100_000,
        }
    }
}

#[derive(Debug, Default)]
pub struct FsPlugin {
    config: OnceLock<FsConfig>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// Path relative to the root.
    pub path: String,
    /// Byte offset to start at (for reading a long file in parts).
    #[serde(default)]
    pub offset: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReadOutput {
    pub path: String,
    pub content: String,
    /// Size of the whole file in bytes.
    pub size: u64,
    /// True when the content was cut at the read limit; read on from `nextOffset`.
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    pub path: String,
    pub content: String,
    /// Append instead of replacing the file.
    #[serde(default)]
    pub append: bool,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct WriteOutput {
    pub path: String,
    pub bytes: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Directory relative to the root; the root when absent.
    #[serde(default)]
    pub path: Option<String>,
    /// Also list what subdirectories hold, at every depth; without it, only the directory's
    /// own entries.
    #[serde(default)]
    pub recursive: bool,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Entry {
    /// The file or directory's own name, e.g. `b.txt` for `a/b.txt`.
    pub name: String,
    /// Where it is, relative to the root: what `fs.read` takes.
    pub path: String,
    /// `file` or `dir`.
    pub kind: String,
    pub size: u64,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct ListOutput {
    pub entries: Vec<Entry>,
    /// True when there were more than 500 entries.
    pub truncated: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// Find files whose name contains this (case-insensitive).
    #[serde(default)]
    pub name: Option<String>,
    /// Find lines containing this text (case-insensitive).
    #[serde(default)]
    pub content: Option<String>,
    /// Directory to search under; the root when absent.
    #[serde(default)]
    pub path: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Match {
    pub path: String,
    /// 1-based line number, for content matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct SearchOutput {
    pub matches: Vec<Match>,
    pub truncated: bool,
}

#[async_trait]
impl Plugin for FsPlugin {
    fn id(&self) -> &str {
        "fs"
    }

    fn everyday(&self) -> bool {
        true
    }

    fn config_schema(&self) -> serde_json::Value {
        agentic_core::schema_of::<FsConfig>()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        let config = fs_config(context.config)?;
        // Other plugins save files a user should find among theirs here.
        context
            .extensions
            .insert(Arc::new(agentic_core::UserFiles(Arc::new(Files {
                config: config.clone(),
            }))));
        let _ = self.config.set(config);
        Ok(())
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let config = self.config.get().cloned().unwrap_or_default();
        let root = Root::for_user(&config, &context.user_id)?;
        let limit = config.max_read_bytes;

        let read_root = root.clone();
        context.add_tool(
            define_tool(
                "fs.read",
                "Read a text file (cut at the read limit; read on with offset)",
                move |_context, input: ReadInput| {
                    let root = read_root.clone();
                    async move {
                        root.read(&input.path, input.offset.unwrap_or(0), limit)
                            .await
                    }
                },
            )
            .idempotent()
            .into_arc(),
        );
        let write_root = root.clone();
        context.add_tool(
            define_tool(
                "fs.write",
                "Write (or append to) a text file; creates its directories",
                move |_context, input: WriteInput| {
                    let root = write_root.clone();
                    async move { root.write(&input.path, &input.content, input.append).await }
                },
            )
            .approval_when(|input: &WriteInput| {
                Some(format!(
                    "{} {}",
                    if input.append { "appends to" } else { "writes" },
                    input.path
                ))
            })
            .into_arc(),
        );
        let list_root = root.clone();
        context.add_tool(
            define_tool(
                "fs.list",
                "List a directory (recursively if asked)",
                move |_context, input: ListInput| {
                    let root = list_root.clone();
                    async move { root.list(input.path.as_deref(), input.recursive).await }
                },
            )
            .idempotent()
            .into_arc(),
        );
        let search_root = root;
        context.add_tool(
            define_tool(
                "fs.search",
                "Find files by name and/or lines by content",
                move |_context, input: SearchInput| {
                    let root = search_root.clone();
                    async move { root.search(input).await }
                },
            )
            .idempotent()
            .into_arc(),
        );
        Ok(())
    }
}

/// The name of a user's own directory under the root: one name per user id, never a path.
///
/// The encoding is injective, so no two ids share a directory: lowercase ASCII letters,
/// digits, `_`, `-`, `@` and `.` (except a leading one) stand for themselves, and every other
/// byte of the id's UTF-8, `%` included, becomes `%` and two lowercase hex digits. Uppercase
/// letters are escaped too, so that `Alice` and `alice` stay apart on case-insensitive file
/// systems, and a leading dot is escaped, so that `.`, `..` and `.ssh` are plain names. The
/// usual ids (`alice`, `alice@example.com`, `svc_reports`) are their own directory names.
pub fn user_directory_name(user_id: &str) -> String {
    let mut name = String::with_capacity(user_id.len());
    for (index, byte) in user_id.bytes().enumerate() {
        let plain = byte.is_ascii_lowercase()
            || byte.is_ascii_digit()
            || matches!(byte, b'_' | b'-' | b'@')
            || (byte == b'.' && index > 0);
        if plain {
            name.push(char::from(byte));
        } else {
            name.push_str(&format!("%{byte:02x}"));
        }
    }
    if name.is_empty() {
        // The empty id still gets a name of its own, one no other id encodes to.
        name.push('%');
    }
    name
}

fn fs_config(config: &agentic_core::Config) -> anyhow::Result<FsConfig> {
    Ok(if config.section("fs").is_null() {
        FsConfig::default()
    } else {
        config.plugin("fs")?
    })
}

/// The user's files, for other plugins (`agentic_core::UserFiles`): under the same root, with
/// the same confinement, as `fs.write`.
struct Files {
    config: FsConfig,
}

#[async_trait]
impl agentic_core::UserFileStore for Files {
    async fn save(
        &self,
        user_id: &str,
        relative: &str,
        bytes: Vec<u8>,
    ) -> Result<String, ToolError> {
        let root = Root::for_user(&self.config, user_id)
            .map_err(|error| ToolError::failed(format!("{error:#}")))?;
        Ok(root.write_bytes(relative, bytes, false).await?.path)
    }

    async fn read(&self, user_id: &str, relative: &str, limit: u64) -> Result<Vec<u8>, ToolError> {
        let root = Root::for_user(&self.config, user_id)
            .map_err(|error| ToolError::failed(format!("{error:#}")))?;
        root.read_bytes(relative, limit).await
    }
}

/// The directory a user's paths live under: the configured root, or with `perUser` the
/// user's directory in it.
#[derive(Debug, Clone)]
pub struct Root {
    base: PathBuf,
    /// The user's directory name ([`user_directory_name`]), opened beneath `base`.
    user: Option<String>,
}

impl Root {
    pub fn new(base: PathBuf) -> Self {
        Self { base, user: None }
    }

    fn for_user(config: &FsConfig, user_id: &str) -> anyhow::Result<Self> {
        let base = match &config.root {
            Some(root) => root.clone(),
            None => std::env::current_dir()?,
        };
        Ok(Self {
            base,
            user: config.per_user.then(|| user_directory_name(user_id)),
        })
    }

    /// `relative` as a clean relative path, refusing absolute paths and `..` before anything
    /// touches the disk. Symbolic links are the kernel's to judge, beneath the root's handle.
    pub fn relative_path(relative: &str) -> Result<PathBuf, ToolError> {
        let relative = relative.trim();
        let path = Path::new(relative);
        if path.is_absolute() || relative.starts_with('~') {
            return Err(ToolError::failed(format!(
                "\"{relative}\" is absolute; paths are relative to the root"
            )));
        }
        let mut clean = PathBuf::new();
        for component in path.components() {
            match component {
                Component::Normal(part) => clean.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(ToolError::failed(format!(
                        "\"{relative}\" uses \"..\"; paths stay under the root"
                    )));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(ToolError::failed(format!(
                        "\"{relative}\" is absolute; paths are relative to the root"
                    )));
                }
            }
        }
        Ok(clean)
    }

    /// A handle on the root directory, made if missing. Every path below is opened beneath
    /// it (`openat2` with `RESOLVE_BENEATH` where the kernel has it): a symbolic link swapped
    /// in at any moment cannot lead out, since there is no check-then-open to race.
    /// With `perUser`, the user's directory is made and opened beneath the configured root's
    /// handle too, so a symbolic link put in its place cannot lead to another user's files or
    /// out of the root.
    fn open(&self) -> Result<Dir, ToolError> {
        let unusable =
            |error: std::io::Error| ToolError::failed(format!("the root is not usable: {error}"));
        std::fs::create_dir_all(&self.base).map_err(unusable)?;
        let root = Dir::open_ambient_dir(&self.base, ambient_authority()).map_err(unusable)?;
        let Some(user) = &self.user else {
            return Ok(root);
        };
        match root.create_dir(user) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(unusable(error)),
        }
        root.open_dir(user).map_err(|error| {
            if is_escape(&error) {
                ToolError::failed(
                    "the user's directory leads out of the root (through a symbolic link)",
                )
            } else {
                unusable(error)
            }
        })
    }

    /// `what` failed on `relative` (as trimmed): an escape says so, anything else gives the
    /// system's words.
    fn failure(what: &str, relative: &str, error: &std::io::Error) -> ToolError {
        if is_escape(error) {
            ToolError::failed(format!(
                "\"{relative}\" leads out of the root (through a symbolic link)"
            ))
        } else {
            ToolError::failed(format!("cannot {what} \"{relative}\": {error}"))
        }
    }

    /// Runs blocking file work off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(Dir) -> Result<T, ToolError> + Send + 'static,
    ) -> Result<T, ToolError> {
        let root = self.clone();
        tokio::task::spawn_blocking(move || work(root.open()?))
            .await
            .map_err(|error| ToolError::failed(format!("the file operation failed: {error}")))?
    }

    /// A whole file's bytes, when it has at most `limit` of them; the same confinement as
    /// `read`.
    pub async fn read_bytes(&self, relative: &str, limit: u64) -> Result<Vec<u8>, ToolError> {
        let clean = Self::relative_path(relative)?;
        let relative = relative.trim().to_owned();
        self.blocking(move |dir| {
            let failed = |error: std::io::Error| Self::failure("read", &relative, &error);
            let mut file = dir.open(&clean).map_err(failed)?;
            let size = file.metadata().map_err(failed)?.len();
            if size > limit {
                return Err(ToolError::failed(format!(
                    "\"{relative}\" has {size} bytes, more than {limit}"
                )));
            }
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).map_err(failed)?;
            Ok(bytes)
        })
        .await
    }

    pub async fn read(
        &self,
        relative: &str,
        offset: u64,
        limit: usize,
    ) -> Result<ReadOutput, ToolError> {
        let clean = Self::relative_path(relative)?;
        let relative = relative.trim().to_owned();
        self.blocking(move |dir| {
            if clean.as_os_str().is_empty() {
                return Err(ToolError::failed(format!("\"{relative}\" is a directory")));
            }
            let failed = |error: std::io::Error| Self::failure("read", &relative, &error);
            let mut file = match dir.open(&clean) {
                Ok(file) => file,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    return Err(ToolError::failed(format!(
                        "{}{}",
                        failed(error),
                        same_name_elsewhere(&dir, &clean)
                    )));
                }
                Err(error) => return Err(failed(error)),
            };
            if file.metadata().map_err(failed)?.is_dir() {
                return Err(ToolError::failed(format!("\"{relative}\" is a directory")));
            }
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).map_err(failed)?;
            let size = bytes.len() as u64;
            let start = usize::try_from(offset.min(size)).unwrap_or(bytes.len());
            let mut end = start.saturating_add(limit).min(bytes.len());
            let mut slice = &bytes[start..end];
            // Cut at a character boundary.
            while end > start && std::str::from_utf8(slice).is_err() {
                end -= 1;
                slice = &bytes[start..end];
            }
            let content = std::str::from_utf8(slice)
                .map_err(|_| ToolError::failed(format!("\"{relative}\" is not a text file")))?
                .to_owned();
            if content.contains('\0') {
                return Err(ToolError::failed(format!(
                    "\"{relative}\" is not a text file"
                )));
            }
            let truncated = (end as u64) < size;
            Ok(ReadOutput {
                path: shown(&clean),
                content,
                size,
                truncated,
                next_offset: truncated.then_some(end as u64),
            })
        })
        .await
    }

    pub async fn write(
        &self,
        relative: &str,
        content: &str,
        append: bool,
    ) -> Result<WriteOutput, ToolError> {
        self.write_bytes(relative, content.as_bytes().to_vec(), append)
            .await
    }

    /// Writes bytes, creating the file's directories; the same confinement as `write`.
    pub async fn write_bytes(
        &self,
        relative: &str,
        content: Vec<u8>,
        append: bool,
    ) -> Result<WriteOutput, ToolError> {
        let clean = Self::relative_path(relative)?;
        let relative = relative.trim().to_owned();
        self.blocking(move |dir| {
            let failed = |error: std::io::Error| Self::failure("write", &relative, &error);
            if clean.as_os_str().is_empty()
                || dir.metadata(&clean).is_ok_and(|metadata| metadata.is_dir())
            {
                return Err(ToolError::failed(format!("\"{relative}\" is a directory")));
            }
            if let Some(parent) = clean
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty())
            {
                dir.create_dir_all(parent).map_err(|error| {
                    // A link out of the root where the directory should be fails as "exists";
                    // following it says why.
                    let error = match dir.metadata(parent) {
                        Err(escape) if is_escape(&escape) => escape,
                        _ => error,
                    };
                    Self::failure("create the directory of", &relative, &error)
                })?;
            }
            let mut options = OpenOptions::new();
            options.write(true).create(true);
            if append {
                options.append(true);
            } else {
                options.truncate(true);
            }
            let mut file = dir.open_with(&clean, &options).map_err(failed)?;
            file.write_all(&content).map_err(failed)?;
            Ok(WriteOutput {
                path: shown(&clean),
                bytes: content.len() as u64,
            })
        })
        .await
    }

    pub async fn list(
        &self,
        relative: Option<&str>,
        recursive: bool,
    ) -> Result<ListOutput, ToolError> {
        let relative = relative.unwrap_or(".").trim().to_owned();
        let clean = Self::relative_path(&relative)?;
        self.blocking(move |dir| list_beneath(&dir, &clean, &relative, recursive))
            .await
    }

    pub async fn search(&self, input: SearchInput) -> Result<SearchOutput, ToolError> {
        let name = input
            .name
            .map(|name| name.to_lowercase())
            .filter(|name| !name.is_empty());
        let content = input
            .content
            .map(|content| content.to_lowercase())
            .filter(|content| !content.is_empty());
        if name.is_none() && content.is_none() {
            return Err(ToolError::failed(
                "give a name, a content text, or both to search for",
            ));
        }
        let relative = input
            .path
            .unwrap_or_else(|| ".".to_owned())
            .trim()
            .to_owned();
        let clean = Self::relative_path(&relative)?;
        self.blocking(move |dir| {
            let listing = list_beneath(&dir, &clean, &relative, true)?;
            let mut matches = Vec::new();
            let mut truncated = listing.truncated;
            for entry in listing.entries.iter().filter(|entry| entry.kind == "file") {
                let file_name = entry
                    .path
                    .rsplit('/')
                    .next()
                    .unwrap_or(&entry.path)
                    .to_lowercase();
                if name.as_ref().is_some_and(|name| !file_name.contains(name)) {
                    continue;
                }
                let Some(content) = &content else {
                    matches.push(Match {
                        path: entry.path.clone(),
                        line: None,
                        text: None,
                    });
                    continue;
                };
                if entry.size > MAX_SEARCH_FILE_BYTES {
                    continue;
                }
                let Ok(text) = dir.read_to_string(&entry.path) else {
                    continue;
                };
                for (index, line) in text.lines().enumerate() {
                    if line.to_lowercase().contains(content) {
                        if matches.len() == MAX_ENTRIES {
                            truncated = true;
                            break;
                        }
                        matches.push(Match {
                            path: entry.path.clone(),
                            line: Some(index + 1),
                            text: Some(line.chars().take(300).collect()),
                        });
                    }
                }
            }
            Ok(SearchOutput { matches, truncated })
        })
        .await
    }
}

/// cap-std's refusal of a path that leads outside the directory it was opened beneath.
fn is_escape(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::PermissionDenied && error.to_string().contains("outside")
}

/// A clean relative path as tools show it: `/`-separated, `.` for the root.
fn shown(clean: &Path) -> String {
    let text = clean.to_string_lossy().replace('\\', "/");
    if text.is_empty() {
        ".".to_owned()
    } else {
        text
    }
}

/// The entries under `clean`, each directory opened beneath its parent's handle. Links are
/// listed but never followed.
fn list_beneath(
    root: &Dir,
    clean: &Path,
    relative: &str,
    recursive: bool,
) -> Result<ListOutput, ToolError> {
    let start = if clean.as_os_str().is_empty() {
        root.try_clone()
    } else {
        match root.metadata(clean) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(metadata) => {
                // What a model that lists a file wants is most often its content.
                return Err(ToolError::failed(format!(
                    "\"{relative}\" is a file ({} bytes), not a folder: \
                     fs.read({{ path: \"{relative}\" }}) gives its content",
                    metadata.len()
                )));
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(ToolError::failed(format!(
                    "{}{}",
                    Root::failure("list", relative, &error),
                    what_the_parent_holds(root, clean)
                )));
            }
            Err(error) => return Err(Root::failure("list", relative, &error)),
        }
        root.open_dir(clean)
    }
    .map_err(|error| Root::failure("list", relative, &error))?;
    let mut entries = Vec::new();
    let mut truncated = false;
    let mut pending = vec![(start, clean.to_path_buf())];
    while let Some((directory, prefix)) = pending.pop() {
        let mut children: Vec<_> = directory
            .entries()
            .map_err(|error| ToolError::failed(format!("cannot list: {error}")))?
            .filter_map(Result::ok)
            .collect();
        children.sort_by_key(|child| child.file_name());
        for child in children {
            let Ok(kind) = child.file_type() else {
                continue;
            };
            let is_dir = kind.is_dir();
            if entries.len() == MAX_ENTRIES {
                truncated = true;
                break;
            }
            let size = if is_dir {
                0
            } else {
                child.metadata().map(|m| m.len()).unwrap_or(0)
            };
            let path = prefix.join(child.file_name());
            entries.push(Entry {
                name: child.file_name().to_string_lossy().into_owned(),
                path: shown(&path),
                kind: if is_dir { "dir" } else { "file" }.to_owned(),
                size,
            });
            if recursive
                && is_dir
                && let Ok(opened) = child.open_dir()
            {
                pending.push((opened, path));
            }
        }
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ListOutput { entries, truncated })
}

#[cfg(test)]
mod tests {
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
}
