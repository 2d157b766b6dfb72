//! Finding and reading ERL config files: one file, or a directory whose
//! `*.yaml` and `*.yml` files are read recursively in name order.
//!
//! Names starting with `.` (files and directories) are skipped (unless
//! `RUNTIME_IGNOREDOTFILES=false`), so a
//! Kubernetes ConfigMap mount, whose `..data` and `..2026_…` directories
//! hold a second copy of every file, loads each domain once (ERL needs
//! `RUNTIME_IGNOREDOTFILES=true` for that). Symbolic links are followed,
//! as the mount's own links must be.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::config::{ErlConfig, PolicyLookup};
use super::error::ConfigError;
use super::{decode, keys, yaml};
use crate::config::{MAX_CONFIG_BYTES, read_text};

/// How deep directories are followed (symbolic links can make loops).
const MAX_DEPTH: usize = 32;

/// Loads the config at `path`. `policies` resolves the names of the
/// `tollgate_policy` extension; `None` turns the extension off.
pub(crate) fn load(
    path: &Path,
    ignore_dotfiles: bool,
    policies: Option<PolicyLookup<'_>>,
) -> Result<ErlConfig, Vec<ConfigError>> {
    parse(&read(path, ignore_dotfiles)?, policies)
}

/// The `(file name, contents)` of the files a path stands for, in order.
pub(crate) fn read(
    path: &Path,
    ignore_dotfiles: bool,
) -> Result<Vec<(String, String)>, Vec<ConfigError>> {
    let mut texts = Vec::new();
    let mut errors = Vec::new();
    for file in find(path, ignore_dotfiles).map_err(|e| vec![e])? {
        let name = file.display().to_string();
        match read_text(&file, MAX_CONFIG_BYTES, "config files") {
            Ok(text) => texts.push((name, text)),
            Err(e) => errors.push(ConfigError::at(&name, e.line, e.message)),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(texts)
}

/// Builds a config from `(file name, contents)` pairs, in order.
pub(crate) fn parse(
    texts: &[(String, String)],
    policies: Option<PolicyLookup<'_>>,
) -> Result<ErlConfig, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let mut docs = Vec::new();
    for (name, text) in texts {
        let root = match yaml::parse(text) {
            Ok(Some(root)) => root,
            Ok(None) => {
                docs.push((name.clone(), decode::RootDoc::default()));
                continue;
            }
            Err(e) => {
                errors.push(ConfigError::at(
                    name,
                    e.line,
                    format!("error loading config file: yaml: {}", e.message),
                ));
                continue;
            }
        };
        let before = errors.len();
        keys::check(name, &root, policies.is_some(), &mut errors);
        if errors.len() > before {
            continue;
        }
        match decode::decode(name, &root) {
            Ok(doc) => docs.push((name.clone(), doc)),
            Err(e) => errors.extend(e),
        }
    }
    match ErlConfig::build(&docs, policies) {
        Ok(config) if errors.is_empty() => Ok(config),
        Ok(_) => Err(errors),
        Err(more) => {
            errors.extend(more);
            Err(errors)
        }
    }
}

/// The files a path stands for, sorted.
pub(crate) fn find(path: &Path, ignore_dotfiles: bool) -> Result<Vec<PathBuf>, ConfigError> {
    let name = path.display().to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| ConfigError::file(&name, format!("cannot read: {e}")))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    walk(path, 0, ignore_dotfiles, &mut files)?;
    files.sort();
    Ok(files)
}

fn walk(
    dir: &Path,
    depth: usize,
    ignore_dotfiles: bool,
    files: &mut Vec<PathBuf>,
) -> Result<(), ConfigError> {
    let name = dir.display().to_string();
    if depth > MAX_DEPTH {
        return Err(ConfigError::file(
            &name,
            format!("directories nested deeper than {MAX_DEPTH} (a symbolic link loop?)"),
        ));
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| ConfigError::file(&name, format!("cannot read: {e}")))?;
    for entry in entries {
        let entry = entry.map_err(|e| ConfigError::file(&name, format!("cannot read: {e}")))?;
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        if ignore_dotfiles && file_name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        // A dangling link is skipped: a ConfigMap swap can leave one briefly.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            walk(&path, depth + 1, ignore_dotfiles, files)?;
        } else if file_name.ends_with(".yaml") || file_name.ends_with(".yml") {
            files.push(path);
        }
    }
    Ok(())
}

/// What a reload watches: each file's path, modification time and size.
pub(crate) type Fingerprint = Vec<(PathBuf, Option<SystemTime>, u64)>;

/// The fingerprint of the files a path stands for now.
pub(crate) fn fingerprint(path: &Path, ignore_dotfiles: bool) -> Fingerprint {
    find(path, ignore_dotfiles)
        .unwrap_or_default()
        .into_iter()
        .map(|file| {
            let meta = std::fs::metadata(&file).ok();
            let modified = meta.as_ref().and_then(|m| m.modified().ok());
            let len = meta.map_or(0, |m| m.len());
            (file, modified, len)
        })
        .collect()
}
