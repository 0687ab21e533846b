//! Which files of a repository make a package: the four published names of one model at one
//! quantization (`<model>-<q>.gguf` and its `mmproj-`, `vocoder-`, `tokenizer-` files).

use super::super::package::Quant;
use super::HubError;

/// The model whose `quant` package is complete in `names`.
pub(super) fn pick_package(repo: &str, quant: Quant, names: &[String]) -> Result<String, HubError> {
    let has = |n: &str| names.iter().any(|m| m == n);
    let complete = |model: &str, q: Quant| {
        let stem = format!("{model}-{}.gguf", q.file_suffix());
        ["", "mmproj-", "vocoder-", "tokenizer-"]
            .iter()
            .all(|p| has(&format!("{p}{stem}")))
    };
    // Backbones `<model>-<q>.gguf`: top-level names that carry none of the other prefixes.
    let mut packages: Vec<(String, Quant)> = names
        .iter()
        .filter(|n| !n.contains('/') && !n.starts_with('.'))
        .filter_map(|n| n.strip_suffix(".gguf"))
        .filter(|s| {
            !["mmproj-", "vocoder-", "tokenizer-"]
                .iter()
                .any(|p| s.starts_with(p))
        })
        .filter_map(|s| {
            let (model, q) = s.rsplit_once('-')?;
            let q = Quant::from_file_suffix(q)?;
            (!model.is_empty() && complete(model, q)).then(|| (model.to_owned(), q))
        })
        .collect();
    packages.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.file_suffix().cmp(b.1.file_suffix())));
    let models: Vec<String> = packages
        .iter()
        .filter(|(_, q)| *q == quant)
        .map(|(m, _)| m.clone())
        .collect();
    match models.as_slice() {
        [one] => Ok(one.clone()),
        [] => {
            let mut files = names.to_vec();
            files.sort();
            Err(HubError::NoPackage {
                repo: repo.to_owned(),
                quant,
                packages: packages
                    .iter()
                    .map(|(m, q)| format!("{m}-{}", q.file_suffix()))
                    .collect(),
                files,
            })
        }
        _ => Err(HubError::AmbiguousPackage {
            repo: repo.to_owned(),
            quant,
            models,
        }),
    }
}

/// The four file names of `model` at `quant`.
pub(super) fn package_files(model: &str, quant: Quant) -> [String; 4] {
    let stem = format!("{model}-{}.gguf", quant.file_suffix());
    [
        stem.clone(),
        format!("mmproj-{stem}"),
        format!("vocoder-{stem}"),
        format!("tokenizer-{stem}"),
    ]
}
