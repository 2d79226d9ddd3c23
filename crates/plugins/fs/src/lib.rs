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

/// The plugin, as the runtime creates it; the `agentic` crate links it by feature.
pub fn create_plugin() -> Arc<dyn Plugin> {
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

/// The largest file a write's preview diffs against.
const PREVIEW_LIMIT: u64 = 1024 * 1024;

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
            .read_only()
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
            .preview_with({
                let root = root.clone();
                move |_context, input: WriteInput| {
                    let root = root.clone();
                    async move { Some(root.write_diff(&input).await) }
                }
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
            .read_only()
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
            .read_only()
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

    /// What writing `input` would change, as a unified diff against the file as it is now
    /// (against nothing for a new file).
    pub async fn write_diff(&self, input: &WriteInput) -> String {
        let before = match self.read_bytes(&input.path, PREVIEW_LIMIT).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => String::new(),
        };
        let after = if input.append {
            format!("{before}{}", input.content)
        } else {
            input.content.clone()
        };
        let path = input.path.trim();
        similar::TextDiff::from_lines(&before, &after)
            .unified_diff()
            .context_radius(2)
            .header(&format!("a/{path}"), &format!("b/{path}"))
            .to_string()
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
mod tests;
