//! Filters: the structured constraints of search and explore (ARD 7.1: a
//! field path to accepted values, OR within a key, AND across keys), the
//! filter expressions of `GET /agents` (ARD Appendix A), and the values a
//! facet counts.
//!
//! Each entry has a *filter view*: every field path of its catalog entry
//! (`type`, `tags`, `capabilities`, `metadata.streaming`,
//! `trustManifest.attestations.type`...), the `publisher` derived from its
//! URN, and the A2A facts of its card under short names (`skill`,
//! `inputMode`, `outputMode`, `streaming`, `pushNotifications`, `binding`,
//! `protocolVersion`, `status`). Values are compared without regard to
//! case; media types accept a `type/*` wildcard and a protocol version
//! `1` matches `1.0`.

use std::collections::{BTreeMap, HashMap};

use agentwire_client::registry::{ARD_CONTEXT, ARD_NAMESPACE, CatalogEntry, Filter};
use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;

use crate::card::{CardFacts, publisher_of};
use crate::model::Record;

/// Keys of the filter view besides the entry's own field paths.
pub const A2A_KEYS: &[&str] = &[
    "publisher",
    "skill",
    "inputMode",
    "outputMode",
    "streaming",
    "pushNotifications",
    "binding",
    "protocolVersion",
    "cardVersion",
    "status",
    "owner",
];

/// Aliases accepted for the keys above.
fn canonical(key: &str) -> &str {
    match key {
        "skills" | "skillId" | "skills.id" => "skill",
        "inputModes" => "inputMode",
        "outputModes" => "outputMode",
        "bindings" | "protocolBinding" => "binding",
        "push" => "pushNotifications",
        "publisherId" => "publisher",
        other => other,
    }
}

/// The filterable values of one entry.
#[derive(Debug, Clone, Default)]
pub struct FilterView {
    values: HashMap<String, Vec<String>>,
}

fn flatten(prefix: &str, v: &Value, out: &mut HashMap<String, Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        Value::Array(a) => {
            for v in a {
                flatten(prefix, v, out);
            }
        }
        Value::Null => {}
        Value::String(s) => out
            .entry(prefix.to_owned())
            .or_default()
            .push(s.to_lowercase()),
        other => out
            .entry(prefix.to_owned())
            .or_default()
            .push(other.to_string()),
    }
}

impl FilterView {
    /// The view of an entry.
    pub fn new(record: &Record, facts: &CardFacts, entry: &CatalogEntry) -> Self {
        let mut values = HashMap::new();
        let mut json = serde_json::to_value(entry).unwrap_or_default();
        if let Some(o) = json.as_object_mut() {
            o.remove("data");
        }
        flatten("", &json, &mut values);
        let mut put = |k: &str, vs: Vec<String>| {
            values.insert(
                k.to_owned(),
                vs.into_iter().map(|v| v.to_lowercase()).collect(),
            );
        };
        put(
            "publisher",
            vec![publisher_of(&record.identifier).to_owned()],
        );
        put("skill", facts.skills.iter().map(|s| s.id.clone()).collect());
        put("inputMode", facts.input_modes.clone());
        put("outputMode", facts.output_modes.clone());
        put("streaming", vec![facts.streaming.to_string()]);
        put(
            "pushNotifications",
            vec![facts.push_notifications.to_string()],
        );
        put("binding", facts.bindings.clone());
        put("protocolVersion", facts.protocol_versions.clone());
        put("cardVersion", vec![facts.card_version.as_str().to_owned()]);
        put("status", vec![record.fetch.status.as_str().to_owned()]);
        put("owner", vec![record.owner.clone()]);
        Self { values }
    }

    /// The values at a key (lower case).
    pub fn get(&self, key: &str) -> &[String] {
        self.values.get(canonical(key)).map_or(&[], Vec::as_slice)
    }
}

/// Whether a filter key can be used.
pub fn known_key(key: &str) -> bool {
    const ENTRY: &[&str] = &[
        "identifier",
        "displayName",
        "type",
        "url",
        "description",
        "tags",
        "capabilities",
        "representativeQueries",
        "version",
        "updatedAt",
    ];
    let key = canonical(key);
    ENTRY.contains(&key)
        || A2A_KEYS.contains(&key)
        || key.starts_with("metadata.")
        || key.starts_with("trustManifest.")
}

/// Whether one stored value satisfies one wanted value.
fn value_matches(key: &str, have: &str, want: &str) -> bool {
    let want = want.trim().to_lowercase();
    match canonical(key) {
        "inputMode" | "outputMode" | "type" => {
            if let Some(major) = want.strip_suffix("/*") {
                return have.split('/').next() == Some(major);
            }
            have == want || have == "*/*"
        }
        "protocolVersion" => have == want || have.starts_with(&format!("{want}.")),
        _ => have == want,
    }
}

/// The JSON-LD context of a search or explore query (ARD v0.91 5.3.1):
/// the prefixes (and terms) it binds to IRIs, layered on the ARD base
/// context, through which filter keys and facet fields are resolved.
#[derive(Debug, Clone, Default)]
pub struct QueryContext {
    terms: HashMap<String, String>,
}

impl QueryContext {
    /// Reads `query.@context`: an object of prefix (or term) to IRI (a
    /// string, or an object with `@id`), the ARD base context's URL, or a
    /// list of those. Other context URLs are refused: the registry does
    /// not fetch remote contexts.
    pub fn parse(context: Option<&Value>) -> Result<Self, String> {
        fn add(v: &Value, terms: &mut HashMap<String, String>) -> Result<(), String> {
            match v {
                Value::Null => Ok(()),
                Value::String(s) if s.trim_end_matches('/') == ARD_CONTEXT => Ok(()),
                Value::String(s) => Err(format!(
                    "query.@context {s:?}: remote contexts are not fetched; bind the prefixes \
                     inline, e.g. {{\"okf\": \"https://openknowledgeformat.org/ns#\"}} (the \
                     ARD base context {ARD_CONTEXT} always applies)"
                )),
                Value::Array(list) => list.iter().try_for_each(|x| add(x, terms)),
                Value::Object(map) => {
                    for (k, v) in map {
                        if k.starts_with('@') {
                            continue;
                        }
                        let iri = match v {
                            Value::String(s) => s.clone(),
                            Value::Object(o) => match o.get("@id").and_then(Value::as_str) {
                                Some(s) => s.to_owned(),
                                None => {
                                    return Err(format!(
                                        "query.@context: the definition of {k:?} has no @id"
                                    ));
                                }
                            },
                            Value::Null => {
                                terms.remove(k);
                                continue;
                            }
                            _ => {
                                return Err(format!(
                                    "query.@context: {k:?} must map to an IRI (a string)"
                                ));
                            }
                        };
                        terms.insert(k.clone(), iri);
                    }
                    Ok(())
                }
                _ => Err("query.@context must be an object, a URL or a list of them".into()),
            }
        }
        let mut terms = HashMap::new();
        if let Some(c) = context {
            add(c, &mut terms)?;
        }
        Ok(Self { terms })
    }

    /// Resolves a filter key or facet field to the path of this registry's
    /// entries: `Ok(Some(path))` for a core term (plain, a full IRI of the
    /// ARD namespace, or a prefixed name whose prefix the query binds to
    /// it; a dot-path's first segment is resolved, the rest kept as it is),
    /// `Ok(None)` for a term of another namespace (no entry here carries
    /// one: it matches nothing), `Err` for a prefix the query does not
    /// bind.
    pub fn resolve(&self, key: &str) -> Result<Option<String>, String> {
        if key.starts_with("http://") || key.starts_with("https://") {
            return Ok(key.strip_prefix(ARD_NAMESPACE).map(str::to_owned));
        }
        let (head, rest) = match key.find('.') {
            Some(i) => (&key[..i], &key[i..]),
            None => (key, ""),
        };
        let iri = if let Some(iri) = self.terms.get(head) {
            self.expand(iri)
        } else if let Some((prefix, suffix)) = head.split_once(':') {
            match self.terms.get(prefix) {
                Some(base) => format!("{}{suffix}", self.expand(base)),
                None => {
                    return Err(format!(
                        "the prefix {prefix:?} of {key:?} is not bound: bind it in query.@context \
                         (e.g. {{\"{prefix}\": \"https://example.com/ns#\"}})"
                    ));
                }
            }
        } else {
            return Ok(Some(key.to_owned()));
        };
        Ok(iri
            .strip_prefix(ARD_NAMESPACE)
            .map(|local| format!("{local}{rest}")))
    }

    /// A compact IRI (`prefix:suffix`) of a bound prefix, expanded once.
    fn expand(&self, iri: &str) -> String {
        match iri.split_once(':') {
            Some((p, suffix)) if !suffix.starts_with("//") => match self.terms.get(p) {
                Some(base) if !base.contains(&format!("{p}:")) => format!("{base}{suffix}"),
                _ => iri.to_owned(),
            },
            _ => iri.to_owned(),
        }
    }
}

/// A filter checked for unknown keys once, applied to many entries.
#[derive(Debug, Clone, Default)]
pub struct CompiledFilter {
    clauses: Vec<(String, Vec<String>)>,
    /// A key names a term no entry here carries: nothing matches.
    impossible: bool,
}

impl CompiledFilter {
    /// Compiles a search / explore filter; unknown keys are refused.
    pub fn new(filter: Option<&Filter>) -> Result<Self, String> {
        Self::with_context(filter, &QueryContext::default())
    }

    /// Compiles a filter whose keys are resolved through the query's
    /// context ([`QueryContext::resolve`]).
    pub fn with_context(filter: Option<&Filter>, context: &QueryContext) -> Result<Self, String> {
        let mut clauses = Vec::new();
        let mut impossible = false;
        for (k, v) in filter.into_iter().flatten() {
            let values: Vec<String> = v.values().into_iter().map(str::to_owned).collect();
            if values.is_empty() {
                return Err(format!("filter {k:?} has no values"));
            }
            let Some(key) = context.resolve(k)? else {
                impossible = true;
                continue;
            };
            if !known_key(&key) {
                return Err(unknown_key(k));
            }
            clauses.push((key, values));
        }
        Ok(Self {
            clauses,
            impossible,
        })
    }

    /// Adds a clause.
    pub fn and(mut self, key: &str, values: Vec<String>) -> Self {
        self.clauses.push((key.to_owned(), values));
        self
    }

    /// Whether the filter names this key.
    pub fn has(&self, key: &str) -> bool {
        self.clauses
            .iter()
            .any(|(k, _)| canonical(k) == canonical(key))
    }

    /// Whether it has no key (every entry passes).
    pub fn is_empty(&self) -> bool {
        self.clauses.is_empty() && !self.impossible
    }

    /// Whether an entry passes: for every key, one of its values matches
    /// one of the entry's.
    pub fn matches(&self, view: &FilterView) -> bool {
        !self.impossible
            && self.clauses.iter().all(|(k, wanted)| {
                let have = view.get(k);
                wanted
                    .iter()
                    .any(|w| have.iter().any(|h| value_matches(k, h, w)))
            })
    }
}

fn unknown_key(k: &str) -> String {
    format!(
        "unsupported filter field {k:?}: use an entry field (type, tags, capabilities, \
         identifier, displayName, version, metadata.*, trustManifest.*) or one of {}",
        A2A_KEYS.join(", ")
    )
}

impl CompiledFilter {
    /// Whether one skill passes the skill-level keys (`skill`,
    /// `inputMode`, `outputMode`); other keys are the entry's.
    pub fn matches_skill(&self, skill: &crate::card::SkillFacts) -> bool {
        self.clauses.iter().all(|(k, wanted)| {
            let have: Vec<String> = match canonical(k) {
                "skill" => vec![skill.id.to_lowercase()],
                "inputMode" => skill.input_modes.iter().map(|m| m.to_lowercase()).collect(),
                "outputMode" => skill
                    .output_modes
                    .iter()
                    .map(|m| m.to_lowercase())
                    .collect(),
                _ => return true,
            };
            wanted
                .iter()
                .any(|w| have.iter().any(|h| value_matches(k, h, w)))
        })
    }
}

/// A comparison of a `GET /agents` filter expression.
#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Has,
}

#[derive(Debug, Clone, PartialEq)]
struct Term {
    field: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed `GET /agents` filter expression (ARD Appendix A): terms
/// `field OP value` joined by `AND`; a value is a quoted string or a bare
/// word; comma-separated values are alternatives (OR). Fields:
/// `displayName` (case-insensitive; `:` for "contains"), `type`,
/// `publisherId`, `createdAfter`, `updatedAfter` (ISO 8601 dates or
/// timestamps), and every search filter key (equality).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListFilter {
    terms: Vec<Term>,
}

/// Dates of an entry for `createdAfter` / `updatedAfter`.
pub struct Dates {
    /// First published.
    pub created: Option<DateTime<Utc>>,
    /// Last changed.
    pub updated: Option<DateTime<Utc>>,
}

/// Parses an ISO 8601 date or timestamp.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

impl ListFilter {
    /// Parses an expression (empty: everything).
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        let mut rest = input.trim();
        while !rest.is_empty() {
            // field
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-')))
                .unwrap_or(rest.len());
            if end == 0 {
                return Err(format!(
                    "expected a field name at {rest:?} (e.g. type = 'application/a2a-agent-card+json')"
                ));
            }
            let field = rest[..end].to_owned();
            rest = rest[end..].trim_start();
            let (op, len) = [
                ("!=", Op::Ne),
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("=", Op::Eq),
                (">", Op::Gt),
                ("<", Op::Lt),
                (":", Op::Has),
            ]
            .into_iter()
            .find(|(s, _)| rest.starts_with(s))
            .map(|(s, op)| (op, s.len()))
            .ok_or_else(|| {
                format!("expected an operator (=, !=, >, >=, <, <=, :) after {field:?}")
            })?;
            rest = rest[len..].trim_start();
            let value;
            if let Some(q) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') {
                let body = &rest[1..];
                let close = body
                    .find(q)
                    .ok_or_else(|| format!("unterminated quoted value after {field:?}"))?;
                value = body[..close].to_owned();
                rest = body[close + 1..].trim_start();
            } else {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                value = rest[..end].to_owned();
                rest = rest[end..].trim_start();
            }
            if value.is_empty() {
                return Err(format!("no value for {field:?}"));
            }
            let term = Term {
                field,
                op,
                values: value.split(',').map(|v| v.trim().to_owned()).collect(),
            };
            Self::check(&term)?;
            terms.push(term);
            if rest.is_empty() {
                break;
            }
            let upper = rest.get(..4).map(str::to_ascii_uppercase);
            if upper.as_deref() == Some("AND ") || upper.as_deref() == Some("AND\t") {
                rest = rest[4..].trim_start();
            } else {
                return Err(format!(
                    "expected AND between terms at {rest:?} (alternatives are comma-separated values)"
                ));
            }
        }
        Ok(Self { terms })
    }

    fn check(t: &Term) -> Result<(), String> {
        match t.field.as_str() {
            "createdAfter" | "updatedAfter" => {
                if !matches!(t.op, Op::Eq | Op::Gt | Op::Ge) {
                    return Err(format!("{} takes = or > and a date", t.field));
                }
                for v in &t.values {
                    if parse_time(v).is_none() {
                        return Err(format!(
                            "{}: {v:?} is not an ISO 8601 date or timestamp (e.g. 2026-01-01)",
                            t.field
                        ));
                    }
                }
                Ok(())
            }
            "displayName" => Ok(()),
            f if known_key(f) => {
                if matches!(t.op, Op::Eq | Op::Ne | Op::Has) {
                    Ok(())
                } else {
                    Err(format!("{f} takes =, != or :"))
                }
            }
            f => Err(unknown_key(f).replace(
                "use an entry field",
                "use displayName, type, publisherId, createdAfter, updatedAfter, an entry field",
            )),
        }
    }

    /// Whether an entry passes.
    pub fn matches(&self, entry: &CatalogEntry, view: &FilterView, dates: &Dates) -> bool {
        self.terms.iter().all(|t| match t.field.as_str() {
            "createdAfter" | "updatedAfter" => {
                let at = if t.field == "createdAfter" {
                    dates.created
                } else {
                    dates.updated
                };
                let Some(at) = at else { return false };
                t.values.iter().any(|v| {
                    parse_time(v).is_some_and(|limit| match t.op {
                        Op::Ge => at >= limit,
                        _ => at > limit,
                    })
                })
            }
            "displayName" => {
                let name = entry.display_name.to_lowercase();
                let any = t.values.iter().any(|v| {
                    let v = v.to_lowercase();
                    match t.op {
                        Op::Has => name.contains(&v),
                        _ => name == v,
                    }
                });
                if t.op == Op::Ne { !any } else { any }
            }
            field => {
                let have = view.get(field);
                let any = t.values.iter().any(|w| match t.op {
                    Op::Has => {
                        let w = w.to_lowercase();
                        have.iter().any(|h| h.contains(&w))
                    }
                    _ => have.iter().any(|h| value_matches(field, h, w)),
                });
                if t.op == Op::Ne { !any } else { any }
            }
        })
    }
}

/// Counts the values of `field` over entries (a facet).
pub fn count_facet<'a>(
    field: &str,
    views: impl Iterator<Item = &'a FilterView>,
) -> BTreeMap<String, u64> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for v in views {
        let mut seen: Vec<&String> = Vec::new();
        for value in v.get(field) {
            if !seen.contains(&value) {
                seen.push(value);
                *counts.entry(value.clone()).or_default() += 1;
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_parse_and_refuse_clearly() {
        let f = ListFilter::parse(
            "type = 'application/a2a-agent-card+json' AND createdAfter > '2026-01-01' AND publisherId = a.com,b.com",
        )
        .unwrap();
        assert_eq!(f.terms.len(), 3);
        assert_eq!(f.terms[2].values, ["a.com", "b.com"]);
        assert!(ListFilter::parse("").unwrap().terms.is_empty());
        for bad in [
            "type",
            "type = ",
            "colour = red",
            "createdAfter > yesterday",
            "type = a OR type = b",
            "displayName = 'x",
        ] {
            assert!(ListFilter::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_match_with_wildcards_and_prefixes() {
        assert!(value_matches("inputMode", "text/plain", "text/*"));
        assert!(value_matches("inputMode", "text/plain", "TEXT/PLAIN"));
        assert!(!value_matches("inputMode", "application/json", "text/*"));
        assert!(value_matches("protocolVersion", "1.0", "1"));
        assert!(!value_matches("protocolVersion", "10.0", "1"));
        assert!(known_key("metadata.streaming") && known_key("skills") && !known_key("colour"));
    }

    #[test]
    fn filter_keys_resolve_through_the_query_context() {
        let ctx = QueryContext::parse(Some(&serde_json::json!([
            ARD_CONTEXT,
            {"ard": ARD_NAMESPACE, "okf": "https://openknowledgeformat.org/ns#",
             "labels": {"@id": "ard:tags"}}
        ])))
        .unwrap();
        let r = |k: &str| ctx.resolve(k);
        assert_eq!(r("tags").unwrap().as_deref(), Some("tags"));
        assert_eq!(r("ard:tags").unwrap().as_deref(), Some("tags"));
        assert_eq!(r("labels").unwrap().as_deref(), Some("tags"));
        assert_eq!(
            r("https://agenticresourcediscovery.org/ns#capabilities")
                .unwrap()
                .as_deref(),
            Some("capabilities")
        );
        assert_eq!(
            r("ard:trustManifest.attestations.type").unwrap().as_deref(),
            Some("trustManifest.attestations.type")
        );
        assert_eq!(
            r("trustManifest.attestations.type").unwrap().as_deref(),
            Some("trustManifest.attestations.type")
        );
        assert_eq!(r("okf:taxonomy").unwrap(), None);
        assert!(r("acme:tier").is_err());
        assert!(
            QueryContext::parse(Some(&serde_json::json!("https://elsewhere.example/ctx"))).is_err()
        );
        assert!(QueryContext::parse(Some(&serde_json::json!(5))).is_err());
        let f: Filter =
            serde_json::from_value(serde_json::json!({"okf:taxonomy": "us-gaap"})).unwrap();
        let c = CompiledFilter::with_context(Some(&f), &ctx).unwrap();
        assert!(!c.matches(&FilterView::default()));
        let f: Filter = serde_json::from_value(serde_json::json!({"ard:colour": "red"})).unwrap();
        assert!(CompiledFilter::with_context(Some(&f), &ctx).is_err());
    }
}
