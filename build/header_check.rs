//! The build-time check that the C headers and the Rust entry points agree: every function that
//! `include/*.h` declares is defined in `src/capi/*.rs` as a `#[no_mangle] extern "C" fn` with
//! the same number of parameters, and every such definition is declared by a header.
//!
//! The headers are written by hand (they are part of the documentation), so this catches the
//! drift a generator would have prevented, at the build instead of at a C caller's link.
//! `tests/c_abi_surface.rs` goes further after the build (parameter and return types, the
//! exported symbols of the built library); this check needs only the sources.
//!
//! Both scanners are small and tolerant rather than full parsers: comments, strings and
//! preprocessor lines are blanked out, the C side takes the brace-free statements of the form
//! `... name(params)` at file scope (inside `extern "C" { }` too), the Rust side the item after
//! each `#[no_mangle]`. Shared by `build.rs` and `tests/header_check.rs` (included by `#[path]`),
//! so it uses std only.

// why: build.rs and the test each use a part of the module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A C function declared in a header or defined in Rust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The C name (the exported symbol).
    pub name: String,
    /// How many parameters it takes (`(void)` is 0).
    pub params: usize,
    /// The 1-based line its declaration or definition starts on.
    pub line: usize,
}

/// The functions of one file, named as a message should name it (`include/audiocpp.h`).
#[derive(Debug, Clone)]
pub struct FileFunctions {
    /// The file's path relative to the package root.
    pub file: String,
    /// What the file declares (a header) or defines (a Rust source).
    pub functions: Vec<Function>,
}

/// One disagreement between the headers and the Rust definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// A header declares a function no Rust source defines.
    NotDefined {
        name: String,
        header: String,
        line: usize,
    },
    /// A Rust source defines an exported function no header declares.
    NotDeclared {
        name: String,
        source: String,
        line: usize,
    },
    /// Declared and defined with different parameter counts.
    ParamCount {
        name: String,
        header: String,
        declared: usize,
        source: String,
        defined: usize,
    },
    /// The same name twice on one side (two declarations, or two definitions).
    Duplicate {
        name: String,
        first: String,
        second: String,
    },
}

impl Mismatch {
    /// The function the mismatch is about.
    pub fn name(&self) -> &str {
        match self {
            Mismatch::NotDefined { name, .. }
            | Mismatch::NotDeclared { name, .. }
            | Mismatch::ParamCount { name, .. }
            | Mismatch::Duplicate { name, .. } => name,
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::NotDefined { name, header, line } => write!(
                f,
                "{header}:{line}: `{name}` is declared, but no src/capi/*.rs defines \
                 `#[no_mangle] extern \"C\" fn {name}`"
            ),
            Mismatch::NotDeclared { name, source, line } => write!(
                f,
                "{source}:{line}: `{name}` is exported (`#[no_mangle] extern \"C\"`), but no \
                 header in include/ declares it"
            ),
            Mismatch::ParamCount {
                name,
                header,
                declared,
                source,
                defined,
            } => write!(
                f,
                "`{name}` takes {declared} parameter(s) in {header} but {defined} in {source}"
            ),
            Mismatch::Duplicate {
                name,
                first,
                second,
            } => write!(f, "`{name}` appears twice: in {first} and in {second}"),
        }
    }
}

/// Why the check failed.
#[derive(Debug)]
pub enum CheckError {
    /// A header or source could not be read.
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A file the scanners cannot make sense of.
    Scan {
        file: String,
        line: usize,
        what: String,
    },
    /// The headers and the definitions disagree.
    Mismatches(Vec<Mismatch>),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Read { path, error } => {
                write!(f, "cannot read {}: {error}", path.display())
            }
            CheckError::Scan { file, line, what } => write!(f, "{file}:{line}: {what}"),
            CheckError::Mismatches(ms) => {
                writeln!(
                    f,
                    "the C headers (include/*.h) and the entry points (src/capi/*.rs) disagree \
                     ({} problem(s)):",
                    ms.len()
                )?;
                for m in ms {
                    writeln!(f, "  - {m}")?;
                }
                write!(
                    f,
                    "fix the header or the Rust definition so that both say the same"
                )
            }
        }
    }
}

impl std::error::Error for CheckError {}

/// What a successful check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Functions declared and defined alike.
    pub functions: usize,
}

/// Checks the package at `root`: its `include/*.h` against its `src/capi/*.rs`.
pub fn check(root: &Path) -> Result<Checked, CheckError> {
    let headers = read_dir_sorted(root, "include", "h")?
        .into_iter()
        .map(|(file, src)| FileFunctions {
            functions: c_declarations(&src),
            file,
        })
        .collect::<Vec<_>>();
    let mut sources = Vec::new();
    for (file, src) in read_dir_sorted(root, "src/capi", "rs")? {
        let functions = rust_definitions(&src).map_err(|(line, what)| CheckError::Scan {
            file: file.clone(),
            line,
            what,
        })?;
        sources.push(FileFunctions { file, functions });
    }
    compare(&headers, &sources)
}

/// Compares what the headers declare with what the sources define.
pub fn compare(
    headers: &[FileFunctions],
    sources: &[FileFunctions],
) -> Result<Checked, CheckError> {
    let mut problems = Vec::new();
    let declared = by_name(headers, &mut problems);
    let defined = by_name(sources, &mut problems);
    if declared.is_empty() {
        // why: an empty set equals an empty set; a moved include/ must not pass unnoticed.
        return Err(CheckError::Scan {
            file: "include/*.h".into(),
            line: 0,
            what: "no C function declarations found".into(),
        });
    }
    for (name, (header, h)) in &declared {
        match defined.get(name) {
            None => problems.push(Mismatch::NotDefined {
                name: name.clone(),
                header: header.clone(),
                line: h.line,
            }),
            Some((source, r)) if r.params != h.params => problems.push(Mismatch::ParamCount {
                name: name.clone(),
                header: format!("{header}:{}", h.line),
                declared: h.params,
                source: format!("{source}:{}", r.line),
                defined: r.params,
            }),
            Some(_) => {}
        }
    }
    for (name, (source, r)) in &defined {
        if !declared.contains_key(name) {
            problems.push(Mismatch::NotDeclared {
                name: name.clone(),
                source: source.clone(),
                line: r.line,
            });
        }
    }
    if problems.is_empty() {
        Ok(Checked {
            functions: declared.len(),
        })
    } else {
        Err(CheckError::Mismatches(problems))
    }
}

/// `name -> (file, function)` over `files`, a second occurrence of a name reported.
fn by_name<'a>(
    files: &'a [FileFunctions],
    problems: &mut Vec<Mismatch>,
) -> BTreeMap<String, (String, &'a Function)> {
    let mut map: BTreeMap<String, (String, &Function)> = BTreeMap::new();
    for f in files {
        for func in &f.functions {
            if let Some((first, g)) = map.get(&func.name) {
                problems.push(Mismatch::Duplicate {
                    name: func.name.clone(),
                    first: format!("{first}:{}", g.line),
                    second: format!("{}:{}", f.file, func.line),
                });
            } else {
                map.insert(func.name.clone(), (f.file.clone(), func));
            }
        }
    }
    map
}

/// The `*.ext` files of `root/dir` as `(relative path, text)`, sorted by name.
fn read_dir_sorted(root: &Path, dir: &str, ext: &str) -> Result<Vec<(String, String)>, CheckError> {
    let read_err = |path: &Path| {
        let path = path.to_path_buf();
        move |error| CheckError::Read { path, error }
    };
    let at = root.join(dir);
    let mut names = Vec::new();
    for e in std::fs::read_dir(&at).map_err(read_err(&at))? {
        let p = e.map_err(read_err(&at))?.path();
        if p.extension().is_some_and(|e| e == ext) {
            names.push(p);
        }
    }
    names.sort();
    names
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).map_err(read_err(&p))?;
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            Ok((format!("{dir}/{name}"), text))
        })
        .collect()
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// `src` with comments and the insides of string and character literals blanked to spaces
/// (newlines kept, so offsets and lines stay those of `src`); `"C"` is kept, for `extern "C"`.
/// A `'` not closing a one-character literal is a Rust lifetime and left alone.
fn blank_comments_and_strings(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied()) {
            (b'/', Some(b'/')) => {
                let end = src[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            (b'/', Some(b'*')) => {
                let end = src[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
                blank(&mut out, i, end);
                i = end;
            }
            (b'"', _) => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                // The quotes stay, so `extern "C"` still reads as one.
                let keep_c = &src[i..(j + 1).min(b.len())] == "\"C\"";
                if !keep_c {
                    blank(&mut out, i + 1, j.min(b.len()));
                }
                i = j + 1;
            }
            (b'\'', _) => {
                // A character literal: 'x' or '\...'; anything else is a Rust lifetime.
                let end = if b.get(i + 1) == Some(&b'\\') {
                    src[i + 2..].find('\'').map(|n| i + 2 + n + 1)
                } else if b.get(i + 2) == Some(&b'\'') {
                    Some(i + 3)
                } else {
                    None
                };
                match end {
                    Some(end) => {
                        blank(&mut out, i + 1, end - 1);
                        i = end;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    // why: each blanked range starts and ends at an ASCII delimiter, so whole UTF-8 sequences
    // became spaces and the bytes are still UTF-8, at the same offsets as `src`'s.
    String::from_utf8(out).expect("blanking whole characters keeps UTF-8")
}

/// `src` with every preprocessor line (and its `\` continuations) blanked.
fn blank_preprocessor(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut continued = false;
    for line in src.split_inclusive('\n') {
        let directive = continued || line.trim_start().starts_with('#');
        if directive {
            continued = line.trim_end_matches(['\n', '\r']).ends_with('\\');
            out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Where the parameter list opened at byte `open` (a `(`) of `s` closes, nesting `()[]{}`.
fn matching_paren(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// How many parameters a list (the text between the parentheses) has: its top-level commas,
/// nesting `()`, `[]`, `{}` and, for Rust generics, `<>` (the `>` of a `->` not counted). A
/// trailing comma (rustfmt's) adds none; `void` alone is C's empty list.
fn count_params(list: &str) -> usize {
    let mut depth = 0i32;
    let mut segments = Vec::new();
    let mut start = 0;
    let mut prev = ' ';
    for (i, c) in list.char_indices() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            '>' if prev == '-' => {}
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                segments.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        prev = c;
    }
    segments.push(&list[start..]);
    let segments: Vec<&str> = segments
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if segments == ["void"] {
        0
    } else {
        segments.len()
    }
}

/// The identifier that ends `s` (after trailing whitespace), if any.
fn trailing_ident(s: &str) -> Option<&str> {
    let s = s.trim_end();
    let start = s
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let id = &s[start..];
    (!id.is_empty() && !id.starts_with(|c: char| c.is_ascii_digit())).then_some(id)
}

/// A file-scope statement (its text without the `;`) read as a function declaration.
fn c_function(stmt: &str) -> Option<(String, usize)> {
    let s = stmt.trim();
    let first_word = s
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next();
    if s.contains(['{', '}', '=']) || first_word == Some("typedef") || !s.ends_with(')') {
        return None;
    }
    let open = s.find('(')?;
    // `void (*hook)(int)`: a pointer variable, not a function.
    if s[open + 1..].trim_start().starts_with('*') {
        return None;
    }
    let name = trailing_ident(&s[..open])?;
    let close = matching_paren(s, open)?;
    // why: `int (*f(int))(void)` (a function returning a function pointer) does not end its
    // own list here; this interface has none, so such a statement is not read as one.
    if close != s.len() - 1 {
        return None;
    }
    Some((name.to_owned(), count_params(&s[open + 1..close])))
}

/// The C functions `header` declares: its file-scope statements `... name(params);` outside
/// comments, preprocessor lines, struct/enum bodies and inline function bodies; the braces of
/// `extern "C" { }` do not count as a scope.
pub fn c_declarations(header: &str) -> Vec<Function> {
    #[derive(PartialEq)]
    enum Brace {
        /// `extern "C" {`: what is inside is still at file scope.
        Linkage,
        /// A function body: the statement ends with its `}`.
        Body,
        /// A struct, union, enum or initializer: the statement goes on after its `}`.
        Aggregate,
    }
    let text = blank_preprocessor(&blank_comments_and_strings(header));
    let mut out = Vec::new();
    let mut braces: Vec<Brace> = Vec::new();
    let mut stmt_start = 0;
    let at_file_scope = |braces: &[Brace]| braces.iter().all(|b| *b == Brace::Linkage);
    for (i, c) in text.char_indices() {
        match c {
            '{' if at_file_scope(&braces) => {
                let before = text[stmt_start..i].trim();
                if before.ends_with("extern \"C\"") {
                    braces.push(Brace::Linkage);
                    stmt_start = i + 1;
                } else if before.ends_with(')') {
                    braces.push(Brace::Body);
                } else {
                    braces.push(Brace::Aggregate);
                }
            }
            '{' => braces.push(Brace::Aggregate),
            '}' => match braces.pop() {
                Some(Brace::Linkage) | None => stmt_start = i + 1,
                Some(Brace::Body) if at_file_scope(&braces) => stmt_start = i + 1,
                Some(_) => {}
            },
            ';' if at_file_scope(&braces) => {
                let stmt = &text[stmt_start..i];
                if let Some((name, params)) = c_function(stmt) {
                    let lead = stmt.len() - stmt.trim_start().len();
                    out.push(Function {
                        name,
                        params,
                        line: line_of(&text, stmt_start + lead),
                    });
                }
                stmt_start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// A cursor over Rust source text, for the few tokens after a `#[no_mangle]`.
struct Cursor<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn skip_ws(&mut self) {
        let rest = &self.s[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }

    /// Consumes `word` (a whole word, or a punctuation string) if it comes next.
    fn eat(&mut self, word: &str) -> bool {
        self.skip_ws();
        let rest = &self.s[self.at..];
        let whole = rest.starts_with(word)
            && !(word.ends_with(|c: char| c.is_ascii_alphanumeric())
                && rest[word.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
        if whole {
            self.at += word.len();
        }
        whole
    }

    /// Consumes a bracketed group opening here (`(...)` or `[...]`).
    fn eat_group(&mut self) -> bool {
        self.skip_ws();
        if !self.s[self.at..].starts_with(['(', '[']) {
            return false;
        }
        match matching_paren(self.s, self.at) {
            Some(close) => {
                self.at = close + 1;
                true
            }
            None => false,
        }
    }

    fn ident(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let rest = &self.s[self.at..];
        let n = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        (n > 0).then(|| {
            self.at += n;
            &rest[..n]
        })
    }
}

/// The exported C functions a Rust source defines: the item after each `#[no_mangle]` (or
/// `#[unsafe(no_mangle)]`), which must read `[pub[(..)]] [unsafe] extern "C" fn name(params)`.
/// Err: the line of a `#[no_mangle]` on anything else and what was expected.
pub fn rust_definitions(src: &str) -> Result<Vec<Function>, (usize, String)> {
    let text = blank_comments_and_strings(src);
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let next = ["#[no_mangle]", "#[unsafe(no_mangle)]"]
            .iter()
            .filter_map(|a| text[from..].find(a).map(|i| (from + i, a.len())))
            .min();
        let Some((at, len)) = next else {
            break;
        };
        let mut c = Cursor {
            s: &text,
            at: at + len,
        };
        // Other attributes may sit between the attribute and the item.
        while c.eat("#") {
            c.eat_group();
        }
        if c.eat("pub") {
            c.eat_group();
        }
        c.eat("unsafe");
        let parsed = (c.eat("extern") && c.eat("\"C\"") && c.eat("fn"))
            .then(|| c.ident())
            .flatten()
            .filter(|_| {
                c.skip_ws();
                text[c.at..].starts_with('(')
            })
            .and_then(|name| {
                let close = matching_paren(&text, c.at)?;
                Some((name, count_params(&text[c.at + 1..close])))
            });
        let line = line_of(&text, at);
        match parsed {
            Some((name, params)) => out.push(Function {
                name: name.to_owned(),
                params,
                line,
            }),
            None => {
                return Err((
                    line,
                    "`#[no_mangle]` on something that is not an `extern \"C\" fn name(...)`: \
                     only functions belong to the C interface"
                        .to_owned(),
                ))
            }
        }
        from = c.at;
    }
    Ok(out)
}
