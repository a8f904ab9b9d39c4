//! npm's semantic versions and version ranges, evaluated exactly as npm
//! evaluates them (the `semver` package, version 7, strict mode).
//!
//! Why not a crate: the Rust ports of node-semver agree with npm on plain
//! `satisfies`, but not with `includePrerelease`, which is what npm uses for
//! `engines` checks (`npm-install-checks`: a Node.js release candidate
//! satisfies `>=24` but not `<24`). This module follows npm's desugaring
//! rules one by one (hyphen ranges, X-ranges, `~`, `^`, `||`, the `-0`
//! bounds) and is tested against a table produced by npm's own `semver`
//! (`fixtures/semver/`).
//!
//! On top of `satisfies`, [`Range::coverage`] tells how much of a release
//! line (say "Node.js 24", every `24.x`) a range accepts: all of it, part of
//! it (and which part), or none.

use std::cmp::Ordering;
use std::fmt;

/// JavaScript's `Number.MAX_SAFE_INTEGER`: npm refuses larger numbers.
const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// A version or range npm would refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemverError(pub String);

impl fmt::Display for SemverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SemverError {}

fn invalid(what: &str, input: &str) -> SemverError {
    SemverError(format!("invalid {what}: {input:?}"))
}

/// One prerelease identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ident {
    /// A numeric identifier (sorts before any alphanumeric one).
    Num(u64),
    /// An alphanumeric identifier (sorts in ASCII order).
    Alpha(String),
}

impl Ord for Ident {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Ident::Num(a), Ident::Num(b)) => a.cmp(b),
            (Ident::Num(_), Ident::Alpha(_)) => Ordering::Less,
            (Ident::Alpha(_), Ident::Num(_)) => Ordering::Greater,
            (Ident::Alpha(a), Ident::Alpha(b)) => a.as_bytes().cmp(b.as_bytes()),
        }
    }
}

impl PartialOrd for Ident {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ident::Num(n) => write!(f, "{n}"),
            Ident::Alpha(s) => f.write_str(s),
        }
    }
}

/// A semantic version (build metadata is parsed and ignored, as npm does).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
    /// Prerelease identifiers (empty for a release).
    pub pre: Vec<Ident>,
}

impl Version {
    /// A release version.
    pub fn new(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            major,
            minor,
            patch,
            pre: Vec::new(),
        }
    }

    /// `M.m.p-0`: the lowest version of the `M.m.p` tuple.
    fn floor(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            major,
            minor,
            patch,
            pre: vec![Ident::Num(0)],
        }
    }

    /// Parses a version the way `new SemVer(v)` does (surrounding blanks and
    /// one leading `v` allowed).
    pub fn parse(input: &str) -> Result<Self, SemverError> {
        let s = input.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let p = parse_partial(s).ok_or_else(|| invalid("version", input))?;
        match (p.major, p.minor, p.patch) {
            (Some(major), Some(minor), Some(patch)) => Ok(Self {
                major,
                minor,
                patch,
                pre: p.pre,
            }),
            _ => Err(invalid("version", input)),
        }
    }

    /// Whether this is a prerelease.
    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }

    /// The smallest version greater than this one: `M.m.(p+1)-0` after a
    /// release, the same prerelease with one more `.0` after a prerelease.
    fn successor(&self) -> Self {
        if self.pre.is_empty() {
            Self::floor(self.major, self.minor, self.patch.saturating_add(1))
        } else {
            let mut next = self.clone();
            next.pre.push(Ident::Num(0));
            next
        }
    }

    fn same_tuple(&self, other: &Self) -> bool {
        (self.major, self.minor, self.patch) == (other.major, other.minor, other.patch)
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, id) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            write!(f, "{id}")?;
        }
        Ok(())
    }
}

/// A version with possibly missing or wildcard parts (`1`, `1.x`, `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Partial {
    major: Option<u64>,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: Vec<Ident>,
}

fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if s.len() > 1 && s.starts_with('0') {
        return None;
    }
    s.parse::<u64>().ok().filter(|n| *n <= MAX_SAFE_INTEGER)
}

/// One `xr` component: a number, or `x` / `X` / `*` (None).
fn parse_xr(s: &str) -> Option<Option<u64>> {
    match s {
        "x" | "X" | "*" => Some(None),
        _ => parse_number(s).map(Some),
    }
}

fn parse_pre(s: &str) -> Option<Vec<Ident>> {
    s.split('.')
        .map(|id| {
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                None
            } else if id.bytes().all(|b| b.is_ascii_digit()) {
                parse_number(id).map(Ident::Num)
            } else {
                Some(Ident::Alpha(id.to_owned()))
            }
        })
        .collect()
}

fn valid_build(s: &str) -> bool {
    s.split('.')
        .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

/// `xr(.xr(.xr(-pre)?(+build)?)?)?` (npm's XRANGEPLAIN without the prefix).
fn parse_partial(s: &str) -> Option<Partial> {
    let (s, build) = match s.split_once('+') {
        Some((v, b)) => (v, Some(b)),
        None => (s, None),
    };
    if let Some(b) = build {
        if !valid_build(b) {
            return None;
        }
    }
    // The prerelease starts at the first '-' after the patch component.
    let mut comps = s.splitn(3, '.');
    let first = comps.next()?;
    let second = comps.next();
    let third = comps.next();
    let (third, pre) = match third {
        Some(t) => match t.split_once('-') {
            Some((p, pre)) => (Some(p), Some(parse_pre(pre)?)),
            None => (Some(t), None),
        },
        None => (None, None),
    };
    if build.is_some() && third.is_none() {
        return None;
    }
    let major = parse_xr(first)?;
    let minor = match second {
        Some(m) => parse_xr(m)?,
        None => None,
    };
    let patch = match third {
        Some(p) => parse_xr(p)?,
        None => None,
    };
    Some(Partial {
        major,
        minor,
        patch,
        pre: pre.unwrap_or_default(),
    })
}

/// A partial after npm's `[v=\s]*` prefix.
fn parse_plain(s: &str) -> Option<Partial> {
    parse_partial(s.trim_start_matches(['v', '=']))
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

/// One comparator; `None` is npm's `ANY` (the empty comparator).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator(Option<(Op, Version)>);

impl Comparator {
    fn any() -> Self {
        Self(None)
    }

    fn new(op: Op, v: Version) -> Self {
        Self(Some((op, v)))
    }

    fn test(&self, v: &Version) -> bool {
        match &self.0 {
            None => true,
            Some((op, c)) => match op {
                Op::Eq => v == c,
                Op::Lt => v < c,
                Op::Le => v <= c,
                Op::Gt => v > c,
                Op::Ge => v >= c,
            },
        }
    }

    /// `<0.0.0-0`: matches nothing.
    fn is_null_set(&self) -> bool {
        matches!(&self.0, Some((Op::Lt, v)) if *v == Version::floor(0, 0, 0))
    }
}

impl fmt::Display for Comparator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("*"),
            Some((op, v)) => {
                let op = match op {
                    Op::Eq => "",
                    Op::Lt => "<",
                    Op::Le => "<=",
                    Op::Gt => ">",
                    Op::Ge => ">=",
                };
                write!(f, "{op}{v}")
            }
        }
    }
}

/// A parsed range: `||`-separated sets of comparators that must all hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    sets: Vec<Vec<Comparator>>,
    include_prerelease: bool,
}

/// How much of a release line a range accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coverage {
    /// Every version of the line.
    All,
    /// Some versions: the accepted part, as a range (e.g. `>=24.3.0`).
    Part(String),
    /// None.
    None,
}

/// A version number with a sentinel for "no upper bound".
type Upper = Option<Version>;

impl Range {
    /// Parses a range as npm does, with or without `includePrerelease`
    /// (which changes the desugared bounds, not only the matching).
    pub fn parse(input: &str, include_prerelease: bool) -> Result<Self, SemverError> {
        let raw = input.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut sets = Vec::new();
        for part in raw.split("||") {
            let set = parse_set(part.trim(), include_prerelease)
                .ok_or_else(|| invalid("range", input))?;
            sets.push(set);
        }
        if sets.len() > 1 {
            let first = sets[0].clone();
            sets.retain(|s| !s.first().is_some_and(Comparator::is_null_set));
            if sets.is_empty() {
                sets = vec![first];
            } else if let Some(any) = sets
                .iter()
                .find(|s| s.len() == 1 && s[0] == Comparator::any())
            {
                sets = vec![any.clone()];
            }
        }
        Ok(Self {
            sets,
            include_prerelease,
        })
    }

    /// Whether `v` satisfies the range (npm's `semver.satisfies`).
    pub fn satisfies(&self, v: &Version) -> bool {
        self.sets.iter().any(|set| self.test_set(set, v))
    }

    fn test_set(&self, set: &[Comparator], v: &Version) -> bool {
        if !set.iter().all(|c| c.test(v)) {
            return false;
        }
        if v.is_prerelease() && !self.include_prerelease {
            // A prerelease only matches a comparator set that names a
            // prerelease of the same major.minor.patch.
            return set.iter().any(|c| match &c.0 {
                Some((_, allowed)) => allowed.is_prerelease() && allowed.same_tuple(v),
                None => false,
            });
        }
        true
    }

    /// Each comparator set as a half-open interval `[lo, hi)` (`hi` None:
    /// unbounded). Exact under `includePrerelease`, where a set is nothing
    /// more than its comparators.
    fn intervals(&self) -> Vec<(Version, Upper)> {
        let mut out = Vec::new();
        for set in &self.sets {
            let mut lo = Version::floor(0, 0, 0);
            let mut hi: Upper = None;
            for c in set {
                let Some((op, v)) = &c.0 else { continue };
                let (l, h) = match op {
                    Op::Eq => (Some(v.clone()), Some(v.successor())),
                    Op::Ge => (Some(v.clone()), None),
                    Op::Gt => (Some(v.successor()), None),
                    Op::Lt => (None, Some(v.clone())),
                    Op::Le => (None, Some(v.successor())),
                };
                if let Some(l) = l {
                    if l > lo {
                        lo = l;
                    }
                }
                if let Some(h) = h {
                    if hi.as_ref().is_none_or(|cur| h < *cur) {
                        hi = Some(h);
                    }
                }
            }
            if hi.as_ref().is_none_or(|h| lo < *h) {
                out.push((lo, hi));
            }
        }
        out
    }

    /// How much of `[line_lo, line_hi)` this range accepts. Meant for a
    /// range parsed with `includePrerelease` (npm's engines check), where
    /// the answer is exact.
    pub fn coverage(&self, line_lo: &Version, line_hi: &Version) -> Coverage {
        let mut clipped: Vec<(Version, Version)> = self
            .intervals()
            .into_iter()
            .filter_map(|(lo, hi)| {
                let lo = if lo > *line_lo { lo } else { line_lo.clone() };
                let hi = match hi {
                    Some(h) if h < *line_hi => h,
                    _ => line_hi.clone(),
                };
                (lo < hi).then_some((lo, hi))
            })
            .collect();
        if clipped.is_empty() {
            return Coverage::None;
        }
        clipped.sort();
        // Merge touching intervals.
        let mut merged: Vec<(Version, Version)> = Vec::new();
        for (lo, hi) in clipped {
            match merged.last_mut() {
                Some((_, last_hi)) if lo <= *last_hi => {
                    if hi > *last_hi {
                        *last_hi = hi;
                    }
                }
                _ => merged.push((lo, hi)),
            }
        }
        if merged.len() == 1 && merged[0].0 == *line_lo && merged[0].1 == *line_hi {
            return Coverage::All;
        }
        let text = merged
            .iter()
            .map(|(lo, hi)| {
                let mut s = String::new();
                if lo != line_lo {
                    s.push_str(&format!(">={lo}"));
                }
                if hi != line_hi {
                    if !s.is_empty() {
                        s.push(' ');
                    }
                    // `<24.4.0-0` reads as `<24.4.0` for a person.
                    if hi.pre == [Ident::Num(0)] {
                        s.push_str(&format!("<{}.{}.{}", hi.major, hi.minor, hi.patch));
                    } else {
                        s.push_str(&format!("<{hi}"));
                    }
                }
                s
            })
            .collect::<Vec<_>>()
            .join(" || ");
        Coverage::Part(text)
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, set) in self.sets.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            for (j, c) in set.iter().enumerate() {
                if j > 0 {
                    f.write_str(" ")?;
                }
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// Whether `version` satisfies `range` (both as npm writes them). An
/// invalid version or range is an error (npm answers `false`).
pub fn satisfies(
    version: &str,
    range: &str,
    include_prerelease: bool,
) -> Result<bool, SemverError> {
    let v = Version::parse(version)?;
    Ok(Range::parse(range, include_prerelease)?.satisfies(&v))
}

/// One `||` alternative: hyphen range or space-separated comparators.
fn parse_set(part: &str, inc_pr: bool) -> Option<Vec<Comparator>> {
    let tokens: Vec<&str> = part.split(' ').filter(|t| !t.is_empty()).collect();
    let mut comps = Vec::new();
    if tokens.len() == 3 && tokens[1] == "-" {
        if let (Some(from), Some(to)) = (parse_plain(tokens[0]), parse_plain(tokens[2])) {
            comps.extend(hyphen(&from, &to, inc_pr));
            return Some(finish_set(comps, inc_pr));
        }
    }
    // Glue a lone operator to the version after it (`>= 1.2` -> `>=1.2`).
    let mut glued: Vec<String> = Vec::new();
    let mut pending: Option<&str> = None;
    for t in tokens {
        if let Some(op) = pending.take() {
            glued.push(format!("{op}{t}"));
        } else if matches!(t, "<" | "<=" | ">" | ">=" | "=" | "~" | "~>" | "^") {
            pending = Some(t);
        } else {
            glued.push(t.to_owned());
        }
    }
    if let Some(op) = pending {
        glued.push(op.to_owned());
    }
    for t in &glued {
        comps.extend(desugar(t, inc_pr)?);
    }
    if comps.is_empty() {
        comps.push(Comparator::any());
    }
    Some(finish_set(comps, inc_pr))
}

/// npm's clean-up of one set: `>=0.0.0` is ANY, a null set stands alone,
/// ANY disappears next to real comparators, duplicates go.
fn finish_set(comps: Vec<Comparator>, inc_pr: bool) -> Vec<Comparator> {
    let gte0 = if inc_pr {
        Version::floor(0, 0, 0)
    } else {
        Version::new(0, 0, 0)
    };
    let mut out: Vec<Comparator> = Vec::new();
    for c in comps {
        let c = match &c.0 {
            Some((Op::Ge, v)) if *v == gte0 => Comparator::any(),
            _ => c,
        };
        if c.is_null_set() {
            return vec![c];
        }
        if !out.contains(&c) {
            out.push(c);
        }
    }
    if out.len() > 1 {
        out.retain(|c| c.0.is_some());
    }
    if out.is_empty() {
        out.push(Comparator::any());
    }
    out
}

fn hyphen(from: &Partial, to: &Partial, inc_pr: bool) -> Vec<Comparator> {
    let z = |v: Version| {
        if inc_pr {
            Version::floor(v.major, v.minor, v.patch)
        } else {
            v
        }
    };
    let mut out = Vec::new();
    match (from.major, from.minor, from.patch) {
        (None, _, _) => {}
        (Some(m), None, _) => out.push(Comparator::new(Op::Ge, z(Version::new(m, 0, 0)))),
        (Some(m), Some(n), None) => out.push(Comparator::new(Op::Ge, z(Version::new(m, n, 0)))),
        (Some(m), Some(n), Some(p)) => {
            let v = Version {
                major: m,
                minor: n,
                patch: p,
                pre: from.pre.clone(),
            };
            out.push(Comparator::new(
                Op::Ge,
                if from.pre.is_empty() { z(v) } else { v },
            ));
        }
    }
    match (to.major, to.minor, to.patch) {
        (None, _, _) => {}
        (Some(m), None, _) => out.push(Comparator::new(
            Op::Lt,
            Version::floor(m.saturating_add(1), 0, 0),
        )),
        (Some(m), Some(n), None) => out.push(Comparator::new(
            Op::Lt,
            Version::floor(m, n.saturating_add(1), 0),
        )),
        (Some(m), Some(n), Some(p)) => {
            if !to.pre.is_empty() {
                let v = Version {
                    major: m,
                    minor: n,
                    patch: p,
                    pre: to.pre.clone(),
                };
                out.push(Comparator::new(Op::Le, v));
            } else if inc_pr {
                out.push(Comparator::new(
                    Op::Lt,
                    Version::floor(m, n, p.saturating_add(1)),
                ));
            } else {
                out.push(Comparator::new(Op::Le, Version::new(m, n, p)));
            }
        }
    }
    out
}

/// One token: `^...`, `~...`, or an X-range / primitive comparator.
fn desugar(token: &str, inc_pr: bool) -> Option<Vec<Comparator>> {
    if let Some(rest) = token.strip_prefix('^') {
        return caret(&parse_plain(rest)?, inc_pr);
    }
    if let Some(rest) = token.strip_prefix('~') {
        let rest = rest.strip_prefix('>').unwrap_or(rest);
        return tilde(&parse_plain(rest)?, inc_pr);
    }
    let (op, rest) = if let Some(r) = token.strip_prefix(">=") {
        (Some(Op::Ge), r)
    } else if let Some(r) = token.strip_prefix("<=") {
        (Some(Op::Le), r)
    } else if let Some(r) = token.strip_prefix('>') {
        (Some(Op::Gt), r)
    } else if let Some(r) = token.strip_prefix('<') {
        (Some(Op::Lt), r)
    } else if let Some(r) = token.strip_prefix('=') {
        (Some(Op::Eq), r)
    } else {
        (None, token)
    };
    xrange(op, &parse_plain(rest)?, inc_pr)
}

fn caret(p: &Partial, inc_pr: bool) -> Option<Vec<Comparator>> {
    let z = |v: Version| {
        if inc_pr {
            Version::floor(v.major, v.minor, v.patch)
        } else {
            v
        }
    };
    let lt = |v: Version| Comparator::new(Op::Lt, v);
    Some(match (p.major, p.minor, p.patch) {
        (None, _, _) => vec![Comparator::any()],
        (Some(m), None, _) => vec![
            Comparator::new(Op::Ge, z(Version::new(m, 0, 0))),
            lt(Version::floor(m.checked_add(1)?, 0, 0)),
        ],
        (Some(m), Some(n), None) => vec![
            Comparator::new(Op::Ge, z(Version::new(m, n, 0))),
            if m == 0 {
                lt(Version::floor(0, n.checked_add(1)?, 0))
            } else {
                lt(Version::floor(m.checked_add(1)?, 0, 0))
            },
        ],
        (Some(m), Some(n), Some(pa)) => {
            let low = Version {
                major: m,
                minor: n,
                patch: pa,
                pre: p.pre.clone(),
            };
            let high = if m == 0 && n == 0 {
                Version::floor(0, 0, pa.checked_add(1)?)
            } else if m == 0 {
                Version::floor(0, n.checked_add(1)?, 0)
            } else {
                Version::floor(m.checked_add(1)?, 0, 0)
            };
            vec![Comparator::new(Op::Ge, low), lt(high)]
        }
    })
}

fn tilde(p: &Partial, inc_pr: bool) -> Option<Vec<Comparator>> {
    let lt = |v: Version| Comparator::new(Op::Lt, v);
    let z = |v: Version| {
        if inc_pr {
            Version::floor(v.major, v.minor, v.patch)
        } else {
            v
        }
    };
    Some(match (p.major, p.minor, p.patch) {
        (None, _, _) => vec![Comparator::any()],
        (Some(m), None, _) => vec![
            Comparator::new(Op::Ge, z(Version::new(m, 0, 0))),
            lt(Version::floor(m.checked_add(1)?, 0, 0)),
        ],
        (Some(m), Some(n), None) => vec![
            Comparator::new(Op::Ge, z(Version::new(m, n, 0))),
            lt(Version::floor(m, n.checked_add(1)?, 0)),
        ],
        (Some(m), Some(n), Some(pa)) => vec![
            Comparator::new(
                Op::Ge,
                Version {
                    major: m,
                    minor: n,
                    patch: pa,
                    pre: p.pre.clone(),
                },
            ),
            lt(Version::floor(m, n.checked_add(1)?, 0)),
        ],
    })
}

fn xrange(op: Option<Op>, p: &Partial, inc_pr: bool) -> Option<Vec<Comparator>> {
    // `x.1` and `1.x.2` are not ranges.
    if (p.major.is_none() && p.minor.is_some()) || (p.minor.is_none() && p.patch.is_some()) {
        return None;
    }
    let x_major = p.major.is_none();
    let x_minor = x_major || p.minor.is_none();
    let any_x = x_minor || p.patch.is_none();
    // `=1.x` means `1.x`.
    let op = if op == Some(Op::Eq) && any_x {
        None
    } else {
        op
    };
    let pr = |v: Version| {
        if inc_pr {
            Version::floor(v.major, v.minor, v.patch)
        } else {
            v
        }
    };
    if x_major {
        return Some(vec![match op {
            Some(Op::Gt) | Some(Op::Lt) => Comparator::new(Op::Lt, Version::floor(0, 0, 0)),
            _ => Comparator::any(),
        }]);
    }
    let major = p.major.unwrap_or(0);
    if let (Some(op), true) = (op, any_x) {
        let (mut m, mut n, mut pa) = (major, p.minor.unwrap_or(0), p.patch.unwrap_or(0));
        if x_minor {
            n = 0;
            pa = 0;
        }
        let mut op = op;
        match op {
            Op::Gt => {
                op = Op::Ge;
                if x_minor {
                    m = m.checked_add(1)?;
                    n = 0;
                    pa = 0;
                } else {
                    n = n.checked_add(1)?;
                    pa = 0;
                }
            }
            Op::Le => {
                op = Op::Lt;
                if x_minor {
                    m = m.checked_add(1)?;
                } else {
                    n = n.checked_add(1)?;
                }
            }
            _ => {}
        }
        let v = if op == Op::Lt {
            Version::floor(m, n, pa)
        } else {
            pr(Version::new(m, n, pa))
        };
        return Some(vec![Comparator::new(op, v)]);
    }
    if x_minor {
        return Some(vec![
            Comparator::new(Op::Ge, pr(Version::new(major, 0, 0))),
            Comparator::new(Op::Lt, Version::floor(major.checked_add(1)?, 0, 0)),
        ]);
    }
    let minor = p.minor.unwrap_or(0);
    if any_x {
        return Some(vec![
            Comparator::new(Op::Ge, pr(Version::new(major, minor, 0))),
            Comparator::new(Op::Lt, Version::floor(major, minor.checked_add(1)?, 0)),
        ]);
    }
    // A full version: a primitive comparator.
    let v = Version {
        major,
        minor,
        patch: p.patch.unwrap_or(0),
        pre: p.pre.clone(),
    };
    Some(vec![Comparator::new(op.unwrap_or(Op::Eq), v)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).expect("valid version")
    }

    #[test]
    fn versions_order_like_npm() {
        let mut vs = vec![
            v("1.0.0"),
            v("1.0.0-rc.1"),
            v("1.0.0-alpha"),
            v("1.0.0-alpha.1"),
            v("1.0.0-alpha.beta"),
            v("1.0.0-beta.11"),
            v("1.0.0-beta.2"),
            v("1.0.0-beta"),
            v("0.9.9"),
        ];
        vs.sort();
        let got: Vec<String> = vs.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "0.9.9",
                "1.0.0-alpha",
                "1.0.0-alpha.1",
                "1.0.0-alpha.beta",
                "1.0.0-beta",
                "1.0.0-beta.2",
                "1.0.0-beta.11",
                "1.0.0-rc.1",
                "1.0.0"
            ]
        );
    }

    #[test]
    fn rejects_what_npm_rejects() {
        for bad in [
            "1.2", "01.2.3", "1.2.3-01", "1.2.3.4", "", "latest", "1.2.3-",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad}");
        }
        for bad in ["!=1.2.3", "latest", "^a.b", "1.2.3 - "] {
            assert!(Range::parse(bad, false).is_err(), "{bad}");
        }
        assert_eq!(v("v1.2.3+build.5"), Version::new(1, 2, 3));
    }

    /// Every (range, version) pair of `fixtures/semver/npm-cases.tsv`, as
    /// npm's own `semver` 7.8 answered it (`gen-cases.js` regenerates it).
    #[test]
    fn agrees_with_npm_semver() {
        let table = include_str!("../../fixtures/semver/npm-cases.tsv");
        let mut checked = 0;
        let mut wrong = Vec::new();
        for line in table.lines().skip(1) {
            let cols: Vec<&str> = line.split('\t').collect();
            let [range, version, plain, with_pre] = cols[..] else {
                panic!("bad fixture line {line:?}");
            };
            let version = v(version);
            for (inc_pr, want) in [(false, plain), (true, with_pre)] {
                let got = match Range::parse(range, inc_pr) {
                    Ok(r) => r.satisfies(&version).to_string(),
                    Err(_) => "invalid".to_owned(),
                };
                if got != want {
                    wrong.push(format!(
                        "{range:?} {version} includePrerelease={inc_pr}: npm {want}, here {got}"
                    ));
                }
                checked += 1;
            }
        }
        assert!(checked > 10_000, "only {checked} cases");
        assert!(
            wrong.is_empty(),
            "{} disagreements:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }

    #[test]
    fn coverage_of_a_release_line() {
        let lo = Version::new(24, 0, 0);
        let hi = Version::floor(25, 0, 0);
        let cov = |r: &str| Range::parse(r, true).expect("range").coverage(&lo, &hi);
        assert_eq!(cov(">=18"), Coverage::All);
        assert_eq!(cov("^14.17.0 || ^16.13.0 || >=18.0.0"), Coverage::All);
        assert_eq!(cov(">=18 <23"), Coverage::None);
        assert_eq!(cov("16.x || 18.x || 20.x"), Coverage::None);
        assert_eq!(cov("^24.3.0"), Coverage::Part(">=24.3.0".into()));
        assert_eq!(cov(">=20 <24.5"), Coverage::Part("<24.5.0".into()));
        // Touching intervals merge: nothing lies between 24.4.9 and 24.4.10-0.
        assert_eq!(cov("<=24.4.9 || >=24.4.10-0"), Coverage::All);
        assert_eq!(
            cov("<=24.4.9 || >=24.5.0"),
            Coverage::Part("<24.4.10 || >=24.5.0".into())
        );
        assert_eq!(cov("24.x"), Coverage::All);
        assert_eq!(cov("*"), Coverage::All);
        assert_eq!(cov("22 - 24"), Coverage::All);
        assert_eq!(cov("22 - 24.1"), Coverage::Part("<24.2.0".into()));
        assert_eq!(cov("18.0.0 - 24.3.x"), Coverage::Part("<24.4.0".into()));
    }
}
