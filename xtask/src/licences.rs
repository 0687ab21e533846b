//! `licences`: the offline licence and ban check of what ships, against `deny.toml`.
//!
//! `deny.toml` is cargo-deny's configuration and stays the policy (a maintainer with cargo-deny
//! runs `cargo deny --offline check licenses bans` on it). This command applies the same policy
//! without building cargo-deny (20 minutes of CI on 2 cores): it reads `cargo metadata` (offline,
//! locked, every feature), walks the graph from the workspace's published crates along normal and
//! build dependencies only (`exclude-dev`), and checks
//! - each crate's SPDX `license` expression against `[licenses] allow` (and the per-crate
//!   `exceptions`): `A OR B` needs one side allowed, `A AND B` both, `X WITH exception` is judged
//!   by `X`, the legacy `A/B` means `A OR B`; a crate with only a `license-file` fails;
//! - `[bans] deny`: none of the named crates is in the graph;
//! - `[bans] wildcards = "deny"`: no `*` version requirement from a shipped crate, and no path
//!   dependency without a version from a published crate (it could not be published).

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// The part of `deny.toml` this check applies.
#[derive(Debug, Default)]
pub struct Policy {
    /// `[licenses] allow`: SPDX identifiers allowed for every crate.
    pub allow: BTreeSet<String>,
    /// `[licenses] exceptions`: crate name -> identifiers allowed for it alone.
    pub exceptions: BTreeMap<String, BTreeSet<String>>,
    /// `[bans] deny`: crates that may not be in the graph.
    pub banned: BTreeSet<String>,
    /// `[bans] wildcards = "deny"`.
    pub deny_wildcards: bool,
}

impl Policy {
    /// Reads the policy from a `deny.toml` text.
    pub fn from_toml(text: &str) -> Result<Policy> {
        let doc: toml::Table = text.parse().context("deny.toml is not valid TOML")?;
        let strings = |v: Option<&toml::Value>| -> BTreeSet<String> {
            v.and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        };
        let licences = doc.get("licenses");
        let allow = strings(licences.and_then(|l| l.get("allow")));
        if allow.is_empty() {
            bail!("deny.toml: [licenses] allow is empty or missing");
        }
        let mut exceptions = BTreeMap::new();
        for e in licences
            .and_then(|l| l.get("exceptions"))
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            let name = e
                .get("crate")
                .or_else(|| e.get("name"))
                .and_then(|v| v.as_str())
                .context("deny.toml: an exception without `crate`")?;
            exceptions.insert(name.to_owned(), strings(e.get("allow")));
        }
        let bans = doc.get("bans");
        let banned = bans
            .and_then(|b| b.get("deny"))
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|d| {
                d.as_str()
                    .or_else(|| d.get("crate").or_else(|| d.get("name"))?.as_str())
                    .map(str::to_owned)
            })
            .collect();
        let deny_wildcards = bans
            .and_then(|b| b.get("wildcards"))
            .and_then(|v| v.as_str())
            == Some("deny");
        Ok(Policy {
            allow,
            exceptions,
            banned,
            deny_wildcards,
        })
    }

    /// Whether `expr` (a crate's `license` field) is allowed for crate `name`.
    pub fn allows(&self, name: &str, expr: &str) -> Result<bool> {
        let extra = self.exceptions.get(name);
        let ok = |id: &str| self.allow.contains(id) || extra.is_some_and(|e| e.contains(id));
        Ok(Spdx::parse(expr)?.eval(&ok))
    }
}

/// An SPDX licence expression (the subset crates use).
#[derive(Debug, PartialEq)]
enum Spdx {
    Id(String),
    Or(Box<Spdx>, Box<Spdx>),
    And(Box<Spdx>, Box<Spdx>),
}

impl Spdx {
    fn parse(expr: &str) -> Result<Spdx> {
        // why the replacements: `A/B` is crates.io's legacy spelling of `A OR B`; parentheses
        // become tokens of their own.
        let spaced = expr
            .replace('/', " OR ")
            .replace('(', " ( ")
            .replace(')', " ) ");
        let tokens: Vec<&str> = spaced.split_whitespace().collect();
        let mut pos = 0;
        let e = Self::or(&tokens, &mut pos)
            .with_context(|| format!("cannot read licence expression `{expr}`"))?;
        if pos != tokens.len() {
            bail!(
                "cannot read licence expression `{expr}`: `{}` left over",
                tokens[pos..].join(" ")
            );
        }
        Ok(e)
    }

    fn or(t: &[&str], pos: &mut usize) -> Result<Spdx> {
        let mut left = Self::and(t, pos)?;
        while t.get(*pos) == Some(&"OR") {
            *pos += 1;
            left = Spdx::Or(Box::new(left), Box::new(Self::and(t, pos)?));
        }
        Ok(left)
    }

    fn and(t: &[&str], pos: &mut usize) -> Result<Spdx> {
        let mut left = Self::atom(t, pos)?;
        while t.get(*pos) == Some(&"AND") {
            *pos += 1;
            left = Spdx::And(Box::new(left), Box::new(Self::atom(t, pos)?));
        }
        Ok(left)
    }

    fn atom(t: &[&str], pos: &mut usize) -> Result<Spdx> {
        let tok = *t.get(*pos).context("the expression ends early")?;
        *pos += 1;
        let e = match tok {
            "(" => {
                let inner = Self::or(t, pos)?;
                if t.get(*pos) != Some(&")") {
                    bail!("a `(` without its `)`");
                }
                *pos += 1;
                inner
            }
            "OR" | "AND" | "WITH" | ")" => bail!("`{tok}` where a licence was expected"),
            id => Spdx::Id(id.trim_end_matches('+').to_owned()),
        };
        // `X WITH exception`: an exception only adds permissions to X, so X decides.
        if t.get(*pos) == Some(&"WITH") {
            t.get(*pos + 1).context("`WITH` without an exception")?;
            *pos += 2;
        }
        Ok(e)
    }

    fn eval(&self, ok: &dyn Fn(&str) -> bool) -> bool {
        match self {
            Spdx::Id(id) => ok(id),
            Spdx::Or(a, b) => a.eval(ok) || b.eval(ok),
            Spdx::And(a, b) => a.eval(ok) && b.eval(ok),
        }
    }
}

/// Checks the dependency graph in `metadata` (`cargo metadata --format-version 1` output) against
/// `policy`; returns one line per problem (none: the check passes) and the number of crates
/// checked.
pub fn check_metadata(metadata: &Value, policy: &Policy) -> Result<(Vec<String>, usize)> {
    let packages: BTreeMap<&str, &Value> = metadata["packages"]
        .as_array()
        .context("metadata without packages")?
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p)))
        .collect();
    let members: Vec<&str> = metadata["workspace_members"]
        .as_array()
        .context("metadata without workspace_members")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // What ships: the published members (`publish = false` is `[]` in the metadata).
    let roots: Vec<&str> = members
        .iter()
        .copied()
        .filter(|id| {
            packages
                .get(id)
                .is_some_and(|p| p["publish"] != Value::Array(vec![]))
        })
        .collect();
    let nodes: BTreeMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .context("metadata without resolve (run without --no-deps)")?
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();

    // The graph along normal and build dependencies (dev-dependencies do not ship).
    let mut seen: BTreeSet<&str> = roots.iter().copied().collect();
    let mut queue: VecDeque<&str> = roots.iter().copied().collect();
    while let Some(id) = queue.pop_front() {
        for dep in nodes
            .get(id)
            .and_then(|n| n["deps"].as_array())
            .into_iter()
            .flatten()
        {
            let shipped = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].as_str() != Some("dev"));
            if let Some(pkg) = dep["pkg"].as_str().filter(|_| shipped) {
                if seen.insert(pkg) {
                    queue.push_back(pkg);
                }
            }
        }
    }

    let mut problems = Vec::new();
    for id in &seen {
        let p = packages
            .get(id)
            .context("resolve names a package metadata lacks")?;
        let name = p["name"].as_str().unwrap_or("?");
        let version = p["version"].as_str().unwrap_or("?");
        match p["license"].as_str() {
            Some(expr) => match policy.allows(name, expr) {
                Ok(true) => {}
                Ok(false) => problems.push(format!("{name} {version}: licence `{expr}` is not allowed")),
                Err(e) => problems.push(format!("{name} {version}: {e:#}")),
            },
            None => problems.push(format!(
                "{name} {version}: no SPDX `license` (only a licence file); add an exception after reading it"
            )),
        }
        if policy.banned.contains(name) {
            problems.push(format!("{name} {version}: banned in deny.toml"));
        }
        if policy.deny_wildcards {
            let published = p["publish"] != Value::Array(vec![]);
            for d in p["dependencies"].as_array().into_iter().flatten() {
                if d["kind"].as_str() == Some("dev") {
                    continue;
                }
                let dep = d["name"].as_str().unwrap_or("?");
                let path_dep = d["path"].is_string();
                if d["req"].as_str() == Some("*") {
                    // why: cargo writes `*` for a path dependency given without a version.
                    if path_dep && published {
                        problems.push(format!(
                            "{name} {version}: path dependency `{dep}` has no version (it could not be published)"
                        ));
                    } else if !path_dep {
                        problems.push(format!("{name} {version}: dependency `{dep}` requires `*`"));
                    }
                }
            }
        }
    }
    Ok((problems, seen.len()))
}

/// Runs the check on the workspace at `root`: `cargo metadata` offline and locked, every feature.
pub fn check_workspace(root: &Path) -> Result<(Vec<String>, usize)> {
    let policy_path = root.join("deny.toml");
    let policy = Policy::from_toml(
        &std::fs::read_to_string(&policy_path)
            .with_context(|| format!("read {}", policy_path.display()))?,
    )?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--all-features",
            "--locked",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata --offline failed (run `cargo fetch --locked` first):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let metadata: Value =
        serde_json::from_slice(&out.stdout).context("cargo metadata printed no JSON")?;
    check_metadata(&metadata, &policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::from_toml(
            r#"
            [licenses]
            allow = ["MIT", "Apache-2.0"]
            exceptions = [{ allow = ["MPL-2.0"], crate = "option-ext" }]
            [bans]
            wildcards = "deny"
            deny = [{ crate = "openssl-sys" }]
            "#,
        )
        .unwrap()
    }

    #[test]
    fn expressions_follow_spdx_precedence() {
        let p = policy();
        assert!(p.allows("x", "MIT").unwrap());
        assert!(p.allows("x", "MIT OR GPL-3.0").unwrap());
        assert!(p.allows("x", "MIT/Apache-2.0").unwrap());
        assert!(!p.allows("x", "MIT AND GPL-3.0").unwrap());
        // AND binds tighter than OR: GPL OR (MIT AND Apache) is allowed.
        assert!(p.allows("x", "GPL-3.0 OR MIT AND Apache-2.0").unwrap());
        assert!(!p.allows("x", "(GPL-3.0 OR MIT) AND LGPL-2.1").unwrap());
        assert!(p.allows("x", "Apache-2.0 WITH LLVM-exception").unwrap());
        assert!(!p
            .allows("x", "GPL-2.0 WITH Classpath-exception-2.0")
            .unwrap());
        assert!(p.allows("option-ext", "MPL-2.0").unwrap());
        assert!(!p.allows("other", "MPL-2.0").unwrap());
        assert!(Spdx::parse("MIT OR").is_err());
        assert!(Spdx::parse("(MIT").is_err());
        assert!(Spdx::parse("MIT Apache-2.0").is_err());
    }

    fn metadata(deps: Value, packages: Value) -> Value {
        serde_json::json!({
            "workspace_members": ["app"],
            "packages": packages,
            "resolve": { "nodes": deps },
        })
    }

    fn pkg(id: &str, license: Value) -> Value {
        serde_json::json!({"id": id, "name": id, "version": "1.0.0", "license": license,
                           "publish": null, "dependencies": []})
    }

    #[test]
    fn the_graph_is_walked_without_dev_dependencies() {
        let nodes = serde_json::json!([
            {"id": "app", "deps": [
                {"pkg": "good", "dep_kinds": [{"kind": null}]},
                {"pkg": "gpl-dev", "dep_kinds": [{"kind": "dev"}]},
                {"pkg": "openssl-sys", "dep_kinds": [{"kind": "build"}]}]},
            {"id": "good", "deps": [{"pkg": "nolicence", "dep_kinds": [{"kind": null}]}]},
            {"id": "gpl-dev", "deps": []},
            {"id": "openssl-sys", "deps": []},
            {"id": "nolicence", "deps": []},
        ]);
        let mut app = pkg("app", "MIT".into());
        app["dependencies"] = serde_json::json!([
            {"name": "good", "req": "*", "kind": null, "path": "/x/good"},
            {"name": "openssl-sys", "req": "*", "kind": "build"},
        ]);
        let packages = serde_json::json!([
            app,
            pkg("good", "MIT OR Apache-2.0".into()),
            pkg("gpl-dev", "GPL-3.0".into()),
            pkg("openssl-sys", "Apache-2.0".into()),
            pkg("nolicence", Value::Null),
        ]);
        let (problems, n) = check_metadata(&metadata(nodes, packages), &policy()).unwrap();
        assert_eq!(n, 4, "the dev-dependency is not walked: {problems:?}");
        let text = problems.join("\n");
        assert!(text.contains("nolicence 1.0.0: no SPDX"), "{text}");
        assert!(text.contains("openssl-sys 1.0.0: banned"), "{text}");
        assert!(
            text.contains("path dependency `good` has no version"),
            "{text}"
        );
        assert!(
            text.contains("dependency `openssl-sys` requires `*`"),
            "{text}"
        );
        assert!(!text.contains("gpl-dev"), "{text}");
        assert_eq!(problems.len(), 4, "{text}");
    }
}
