//! "did you mean `X`?" for unknown keys.

/// Names people reach for that are too far from loom's spelling for edit distance to find.
const SYNONYMS: &[(&str, &str)] = &[
    ("environment", "env"),
    ("envs", "env"),
    ("arguments", "args"),
    ("argv", "args"),
    ("cmd", "command"),
    ("workingdirectory", "cwd"),
    ("workingdir", "cwd"),
    ("workdir", "cwd"),
    ("dir", "cwd"),
    ("timeout", "callTimeoutMs"),
    ("enabled", "disabled"),
    ("passthrough", "envPassthrough"),
    ("allow", "allowTools"),
    ("deny", "denyTools"),
    ("tools", "allowTools"),
    ("duckdbmemory", "duckdbMemoryLimit"),
    ("memorylimit", "engineMemoryLimit"),
];

/// Normalized Damerau-Levenshtein similarity at or above which a key counts as a typo. 0.7
/// allows roughly one edit in four characters: `tokenTreshold` and `comand` qualify, while
/// unrelated short words like `foo` vs `env` do not.
const MIN_SIMILARITY: f64 = 0.7;
/// Jaro-Winkler catches a missing or extra tail (`callTimeout` for `callTimeoutMs`) that edit
/// distance scores too low on short names.
const MIN_JARO_WINKLER: f64 = 0.92;

/// Case and `_`/`-` differences never make a key a different key: `token_threshold`,
/// `TokenThreshold` and `tokenthreshold` are all `tokenThreshold`.
fn fold(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The known key `unknown` was most likely meant to be, if any is close enough.
pub(crate) fn did_you_mean<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let folded = fold(unknown);
    if let Some(exact) = known.iter().find(|k| fold(k) == folded) {
        return Some(exact);
    }
    // Synonyms are scored by their own spelling, so `enviroment` still finds `env`.
    let synonyms = SYNONYMS
        .iter()
        .filter_map(|(from, to)| known.iter().find(|k| *k == to).map(|k| (*from, *k)));
    let own = known.iter().map(|k| (*k, *k));
    own.chain(synonyms)
        .map(|(spelling, key)| {
            let f = fold(spelling);
            let dl = strsim::normalized_damerau_levenshtein(&folded, &f);
            let jw = strsim::jaro_winkler(&folded, &f);
            (key, dl, jw)
        })
        .filter(|(_, dl, jw)| *dl >= MIN_SIMILARITY || *jw >= MIN_JARO_WINKLER)
        .max_by(|a, b| (a.1 + a.2).total_cmp(&(b.1 + b.2)))
        .map(|(key, _, _)| key)
}

/// `` `a`, `b` or `c` ``, for "allowed keys" messages.
pub(crate) fn key_list(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[&str] = &[
        "tokenThreshold",
        "memoryBudgetBytes",
        "engineMemoryLimit",
        "duckdbMemoryLimit",
        "exportDir",
        "queryTimeoutMs",
        "neutralizeCsvFormulas",
        "restart",
        "maxToolNameLength",
        "snapshot",
    ];
    const SERVER_KEYS: &[&str] = &[
        "name",
        "command",
        "args",
        "env",
        "envPassthrough",
        "callTimeoutMs",
        "disabled",
        "cwd",
    ];

    #[test]
    fn typos_find_the_key() {
        assert_eq!(did_you_mean("tokenTreshold", KEYS), Some("tokenThreshold"));
        assert_eq!(did_you_mean("exportdir", KEYS), Some("exportDir"));
        assert_eq!(
            did_you_mean("token_threshold", KEYS),
            Some("tokenThreshold")
        );
        assert_eq!(did_you_mean("restarts", KEYS), Some("restart"));
        assert_eq!(did_you_mean("comand", SERVER_KEYS), Some("command"));
        assert_eq!(did_you_mean("arg", SERVER_KEYS), Some("args"));
        assert_eq!(
            did_you_mean("callTimeout", SERVER_KEYS),
            Some("callTimeoutMs")
        );
        assert_eq!(
            did_you_mean("envPasthrough", SERVER_KEYS),
            Some("envPassthrough")
        );
    }

    #[test]
    fn synonyms_find_the_key() {
        assert_eq!(did_you_mean("environment", SERVER_KEYS), Some("env"));
        assert_eq!(did_you_mean("timeout", SERVER_KEYS), Some("callTimeoutMs"));
        assert_eq!(did_you_mean("workingDirectory", SERVER_KEYS), Some("cwd"));
        assert_eq!(did_you_mean("enabled", SERVER_KEYS), Some("disabled"));
        assert_eq!(did_you_mean("enviroment", SERVER_KEYS), Some("env"));
        assert_eq!(did_you_mean("working_directory", SERVER_KEYS), Some("cwd"));
    }

    #[test]
    fn unrelated_keys_find_nothing() {
        assert_eq!(did_you_mean("foo", SERVER_KEYS), None);
        assert_eq!(did_you_mean("globalShortcut", KEYS), None);
        assert_eq!(did_you_mean("autoApprove", SERVER_KEYS), None);
        assert_eq!(did_you_mean("timeout", KEYS), None);
    }

    #[test]
    fn key_list_reads_as_a_sentence() {
        assert_eq!(key_list(&[]), "");
        assert_eq!(key_list(&["a"]), "`a`");
        assert_eq!(key_list(&["a", "b", "c"]), "`a`, `b` or `c`");
    }
}
