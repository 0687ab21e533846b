//! Applies `ggml-sys/upstream/patches/series` to the copied tree.
//!
//! A deliberately strict unified-diff applier: every hunk must match the pinned tree exactly at the
//! line it names (no fuzz, no offset search). The tree is pinned, so any drift is a bug in the
//! series and must stop the build rather than silently patch the wrong place.

use std::fs;
use std::path::Path;

/// Applies every patch named in `series`, in order; panics (failing the build) on any mismatch.
pub fn apply_series(patches_dir: &Path, root: &Path) {
    for name in series(patches_dir) {
        let path = patches_dir.join(&name);
        let patch = fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("series names {name}, which cannot be read: {e}"));
        apply_patch(&patch, root).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// The patch file names listed in `series`, in order.
pub fn series(patches_dir: &Path) -> Vec<String> {
    let series = patches_dir.join("series");
    let text = fs::read_to_string(&series)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", series.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Applies one (possibly multi-file) unified diff under `root`; returns the touched paths.
pub fn apply_patch(patch: &str, root: &Path) -> Result<Vec<String>, String> {
    let files = parse(patch)?;
    for file in &files {
        apply_file(root, file).map_err(|e| format!("{}: {e}", file.path))?;
    }
    Ok(files.into_iter().map(|f| f.path).collect())
}

struct FilePatch {
    path: String,
    is_new: bool,
    is_deleted: bool,
    hunks: Vec<Hunk>,
}

struct Hunk {
    header: String,
    old_start: usize,
    old_len: usize,
    /// (tag, text): tag is ' ', '-' or '+'.
    lines: Vec<(char, String)>,
    old_ends_without_newline: bool,
    new_ends_without_newline: bool,
}

fn strip_prefix(path: &str) -> Option<String> {
    let path = path.split('\t').next().unwrap_or(path).trim();
    if path == "/dev/null" {
        return None;
    }
    Some(
        path.strip_prefix("a/")
            .or_else(|| path.strip_prefix("b/"))
            .unwrap_or(path)
            .to_string(),
    )
}

fn parse_range(s: &str) -> Result<(usize, usize), String> {
    let (start, len) = match s.split_once(',') {
        Some((a, b)) => (a, b),
        None => (s, "1"),
    };
    let p = |v: &str| {
        v.parse::<usize>()
            .map_err(|_| format!("bad hunk range `{s}`"))
    };
    Ok((p(start)?, p(len)?))
}

fn parse(text: &str) -> Result<Vec<FilePatch>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(old) = lines[i].strip_prefix("--- ") else {
            i += 1; // commit message, `diff --git`, `index` lines: not ours to read
            continue;
        };
        let new = lines
            .get(i + 1)
            .and_then(|l| l.strip_prefix("+++ "))
            .ok_or_else(|| format!("`--- {old}` without a `+++` line"))?;
        let (old_path, new_path) = (strip_prefix(old), strip_prefix(new));
        let path = new_path
            .clone()
            .or(old_path.clone())
            .ok_or("both sides are /dev/null")?;
        let mut file = FilePatch {
            path,
            is_new: old_path.is_none(),
            is_deleted: new_path.is_none(),
            hunks: Vec::new(),
        };
        i += 2;
        while i < lines.len() && lines[i].starts_with("@@ ") {
            let header = lines[i].to_string();
            let inner = header
                .strip_prefix("@@ -")
                .and_then(|h| h.split_once(" @@").map(|(r, _)| r))
                .ok_or_else(|| format!("bad hunk header `{header}`"))?;
            let (old_r, new_r) = inner
                .split_once(" +")
                .ok_or_else(|| format!("bad hunk header `{header}`"))?;
            let (old_start, old_len) = parse_range(old_r)?;
            let (_, new_len) = parse_range(new_r)?;
            let mut hunk = Hunk {
                header,
                old_start,
                old_len,
                lines: Vec::new(),
                old_ends_without_newline: false,
                new_ends_without_newline: false,
            };
            i += 1;
            let (mut seen_old, mut seen_new) = (0, 0);
            while i < lines.len() && (seen_old < old_len || seen_new < new_len) {
                let line = lines[i];
                let (tag, rest) = match line.chars().next() {
                    Some(c @ (' ' | '-' | '+')) => (c, &line[1..]),
                    None => (' ', ""), // some editors strip the lone space of an empty context line
                    Some(_) => {
                        return Err(format!(
                            "unexpected line in hunk `{}`: `{line}`",
                            hunk.header
                        ))
                    }
                };
                if tag != '+' {
                    seen_old += 1;
                }
                if tag != '-' {
                    seen_new += 1;
                }
                hunk.lines.push((tag, rest.to_string()));
                i += 1;
                if lines.get(i).is_some_and(|l| l.starts_with("\\ ")) {
                    match tag {
                        '-' => hunk.old_ends_without_newline = true,
                        '+' => hunk.new_ends_without_newline = true,
                        _ => {
                            hunk.old_ends_without_newline = true;
                            hunk.new_ends_without_newline = true;
                        }
                    }
                    i += 1;
                }
            }
            if seen_old != old_len || seen_new != new_len {
                return Err(format!("hunk `{}` is truncated", hunk.header));
            }
            file.hunks.push(hunk);
        }
        files.push(file);
    }
    Ok(files)
}

fn apply_file(root: &Path, file: &FilePatch) -> Result<(), String> {
    let target = root.join(&file.path);
    let original = if file.is_new {
        if target.exists() {
            return Err("patch creates a file that already exists".into());
        }
        String::new()
    } else {
        fs::read_to_string(&target).map_err(|e| format!("cannot read: {e}"))?
    };
    let mut old_lines: Vec<&str> = original.split('\n').collect();
    let mut ends_with_newline = original.ends_with('\n');
    if ends_with_newline || original.is_empty() {
        old_lines.pop();
    }
    let mut out: Vec<String> = Vec::with_capacity(old_lines.len());
    let mut cursor = 0usize; // next unconsumed line of the original (0-based)
    for hunk in &file.hunks {
        // A hunk that only adds lines at the top names line 0.
        let start = if hunk.old_len == 0 {
            hunk.old_start
        } else {
            hunk.old_start - 1
        };
        if start < cursor || start > old_lines.len() {
            return Err(format!(
                "hunk `{}` is out of order or past the end",
                hunk.header
            ));
        }
        out.extend(old_lines[cursor..start].iter().map(|s| s.to_string()));
        let mut at = start;
        for (tag, text) in &hunk.lines {
            if *tag != '+' {
                if old_lines.get(at) != Some(&text.as_str()) {
                    return Err(format!(
                        "hunk `{}` does not match line {}: expected `{text}`, found `{}`",
                        hunk.header,
                        at + 1,
                        old_lines.get(at).unwrap_or(&"<end of file>")
                    ));
                }
                at += 1;
            }
            if *tag != '-' {
                out.push(text.clone());
            }
        }
        if hunk.old_ends_without_newline && (at != old_lines.len() || ends_with_newline) {
            return Err(format!(
                "hunk `{}` expects the file to end without a newline",
                hunk.header
            ));
        }
        if at == old_lines.len() {
            ends_with_newline = !hunk.new_ends_without_newline;
        }
        cursor = at;
    }
    out.extend(old_lines[cursor..].iter().map(|s| s.to_string()));

    if file.is_deleted {
        if !out.is_empty() {
            return Err("deletion leaves lines behind".into());
        }
        return fs::remove_file(&target).map_err(|e| format!("cannot delete: {e}"));
    }
    let mut text = out.join("\n");
    if ends_with_newline && !out.is_empty() {
        text.push('\n');
    }
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("cannot create parent: {e}"))?;
    }
    fs::write(&target, text).map_err(|e| format!("cannot write: {e}"))
}
