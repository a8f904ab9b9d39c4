//! The URL table of the HTTP+JSON (REST) binding (A2A specification,
//! section 11.3): one method and path template per operation, written once
//! and used both by servers (to tell the operation from a request) and by
//! clients (to build the request URL).
//!
//! Every path may be prefixed with `/{tenant}`. Ids are single path
//! segments, percent-encoded when built (so `/`, `:`, `?` or spaces in an
//! id cannot change the URL's meaning); the verbs `:send`, `:stream`,
//! `:cancel` and `:subscribe` are literal suffixes.
//!
//! ```
//! use agentwire_types::rest_routes::{RestMethod, RestRoute};
//! let route = RestRoute::CancelTask { id: "task 1".into() };
//! assert_eq!(route.method(), RestMethod::Post);
//! assert_eq!(route.path("acme"), "/acme/tasks/task%201:cancel");
//! let (tenant, parsed) = RestRoute::parse("POST", "/acme/tasks/task%201:cancel").unwrap();
//! assert_eq!((tenant.as_str(), parsed), ("acme", route));
//! ```

use std::borrow::Cow;
use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// Everything but the RFC 3986 unreserved characters is percent-encoded in
/// path segments (and, by clients, in query values).
pub const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The HTTP methods the binding uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RestMethod {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `DELETE`
    Delete,
}

impl RestMethod {
    /// The method's name (`GET`, `POST`, `DELETE`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Delete => "DELETE",
        }
    }
}

impl fmt::Display for RestMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the table: an operation, the methods it answers and its path
/// template (`{id}`-style placeholders, each one whole path segment, with an
/// optional literal suffix such as `:cancel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteTemplate {
    /// The operation's name in the specification (`SendMessage`...).
    pub operation: &'static str,
    /// The methods accepted; clients use the first.
    pub methods: &'static [RestMethod],
    /// The path under the interface URL (and the optional tenant).
    pub path: &'static str,
}

/// The table, in the order requests are matched: the verb suffixes
/// (`/tasks/{id}:cancel`) come before the plain `/tasks/{id}`.
pub const ROUTES: [RouteTemplate; 11] = [
    RouteTemplate {
        operation: "SendMessage",
        methods: &[RestMethod::Post],
        path: "/message:send",
    },
    RouteTemplate {
        operation: "SendStreamingMessage",
        methods: &[RestMethod::Post],
        path: "/message:stream",
    },
    RouteTemplate {
        operation: "GetExtendedAgentCard",
        methods: &[RestMethod::Get],
        path: "/extendedAgentCard",
    },
    RouteTemplate {
        operation: "ListTasks",
        methods: &[RestMethod::Get],
        path: "/tasks",
    },
    RouteTemplate {
        operation: "CancelTask",
        methods: &[RestMethod::Post],
        path: "/tasks/{id}:cancel",
    },
    // The proto's HTTP rule says GET, the specification's table POST: both
    // are accepted, clients try GET first.
    RouteTemplate {
        operation: "SubscribeToTask",
        methods: &[RestMethod::Get, RestMethod::Post],
        path: "/tasks/{id}:subscribe",
    },
    RouteTemplate {
        operation: "GetTask",
        methods: &[RestMethod::Get],
        path: "/tasks/{id}",
    },
    RouteTemplate {
        operation: "CreateTaskPushNotificationConfig",
        methods: &[RestMethod::Post],
        path: "/tasks/{taskId}/pushNotificationConfigs",
    },
    RouteTemplate {
        operation: "ListTaskPushNotificationConfigs",
        methods: &[RestMethod::Get],
        path: "/tasks/{taskId}/pushNotificationConfigs",
    },
    RouteTemplate {
        operation: "GetTaskPushNotificationConfig",
        methods: &[RestMethod::Get],
        path: "/tasks/{taskId}/pushNotificationConfigs/{id}",
    },
    RouteTemplate {
        operation: "DeleteTaskPushNotificationConfig",
        methods: &[RestMethod::Delete],
        path: "/tasks/{taskId}/pushNotificationConfigs/{id}",
    },
];

/// An operation of the binding with the ids its path carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RestRoute {
    /// `POST /message:send`
    SendMessage,
    /// `POST /message:stream`
    SendStreamingMessage,
    /// `GET /extendedAgentCard`
    GetExtendedAgentCard,
    /// `GET /tasks`
    ListTasks,
    /// `POST /tasks/{id}:cancel`
    CancelTask {
        /// The task id.
        id: String,
    },
    /// `GET` (or `POST`) `/tasks/{id}:subscribe`
    SubscribeToTask {
        /// The task id.
        id: String,
    },
    /// `GET /tasks/{id}`
    GetTask {
        /// The task id.
        id: String,
    },
    /// `POST /tasks/{taskId}/pushNotificationConfigs`
    CreateTaskPushNotificationConfig {
        /// The task id.
        task_id: String,
    },
    /// `GET /tasks/{taskId}/pushNotificationConfigs`
    ListTaskPushNotificationConfigs {
        /// The task id.
        task_id: String,
    },
    /// `GET /tasks/{taskId}/pushNotificationConfigs/{id}`
    GetTaskPushNotificationConfig {
        /// The task id.
        task_id: String,
        /// The configuration id.
        id: String,
    },
    /// `DELETE /tasks/{taskId}/pushNotificationConfigs/{id}`
    DeleteTaskPushNotificationConfig {
        /// The task id.
        task_id: String,
        /// The configuration id.
        id: String,
    },
}

/// Why a path names no operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteError {
    /// No operation has this path (HTTP 404).
    NotFound,
    /// The path is an operation's, the method is not (HTTP 405).
    MethodNotAllowed,
}

impl RestRoute {
    /// The row of [`ROUTES`] this route belongs to.
    pub fn template(&self) -> &'static RouteTemplate {
        &ROUTES[self.index()]
    }

    /// The method a client sends (the first the table accepts).
    pub fn method(&self) -> RestMethod {
        self.template().methods[0]
    }

    /// The path, `/{tenant}` first when `tenant` is not empty, every id
    /// percent-encoded.
    pub fn path(&self, tenant: &str) -> String {
        let template = self.template().path;
        let ids = self.ids();
        let mut out = String::with_capacity(template.len() + tenant.len() + 48);
        if !tenant.is_empty() {
            out.push('/');
            out.extend(utf8_percent_encode(tenant, COMPONENT));
        }
        let mut next = ids.iter();
        for segment in template.split('/').skip(1) {
            out.push('/');
            match split_placeholder(segment) {
                Some(suffix) => {
                    let id = next.next().copied().unwrap_or_default();
                    out.extend(utf8_percent_encode(id, COMPONENT));
                    out.push_str(suffix);
                }
                None => out.push_str(segment),
            }
        }
        out
    }

    /// Tells the tenant (empty when the path has none) and the route from a
    /// method name and a path (without the query, under the interface URL).
    ///
    /// The path is first read without a tenant, then with its first segment
    /// as the tenant; the first row of [`ROUTES`] whose path matches
    /// decides, and the method must be one the row (or a row with the same
    /// path) accepts. So a tenant spelled like a top-level segment
    /// (`tasks`) is read as that segment when the path also fits without
    /// a tenant (`/tasks/tasks` is the task `tasks`).
    pub fn parse(method: &str, path: &str) -> Result<(String, Self), RouteError> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        if let Some(found) = Self::match_segments(method, &segments) {
            return found.map(|route| (String::new(), route));
        }
        if let [tenant, rest @ ..] = segments.as_slice() {
            if !tenant.is_empty() && !rest.is_empty() {
                if let Some(found) = Self::match_segments(method, rest) {
                    return found.map(|route| (decode(tenant).into_owned(), route));
                }
            }
        }
        Err(RouteError::NotFound)
    }

    /// `None` when no row's path matches; else the route or a wrong method.
    fn match_segments(method: &str, segments: &[&str]) -> Option<Result<Self, RouteError>> {
        let (index, ids) = ROUTES
            .iter()
            .enumerate()
            .find_map(|(i, row)| match_path(row.path, segments).map(|ids| (i, ids)))?;
        let path = ROUTES[index].path;
        let accepted = ROUTES
            .iter()
            .enumerate()
            .filter(|(_, row)| row.path == path)
            .find(|(_, row)| row.methods.iter().any(|m| m.as_str() == method));
        Some(match accepted {
            Some((i, _)) => Ok(Self::from_index(i, ids)),
            None => Err(RouteError::MethodNotAllowed),
        })
    }

    fn index(&self) -> usize {
        match self {
            Self::SendMessage => 0,
            Self::SendStreamingMessage => 1,
            Self::GetExtendedAgentCard => 2,
            Self::ListTasks => 3,
            Self::CancelTask { .. } => 4,
            Self::SubscribeToTask { .. } => 5,
            Self::GetTask { .. } => 6,
            Self::CreateTaskPushNotificationConfig { .. } => 7,
            Self::ListTaskPushNotificationConfigs { .. } => 8,
            Self::GetTaskPushNotificationConfig { .. } => 9,
            Self::DeleteTaskPushNotificationConfig { .. } => 10,
        }
    }

    /// The ids in the order of the template's placeholders.
    fn ids(&self) -> Vec<&str> {
        match self {
            Self::SendMessage
            | Self::SendStreamingMessage
            | Self::GetExtendedAgentCard
            | Self::ListTasks => Vec::new(),
            Self::CancelTask { id } | Self::SubscribeToTask { id } | Self::GetTask { id } => {
                vec![id]
            }
            Self::CreateTaskPushNotificationConfig { task_id }
            | Self::ListTaskPushNotificationConfigs { task_id } => vec![task_id],
            Self::GetTaskPushNotificationConfig { task_id, id }
            | Self::DeleteTaskPushNotificationConfig { task_id, id } => vec![task_id, id],
        }
    }

    fn from_index(index: usize, ids: Vec<String>) -> Self {
        let mut ids = ids.into_iter();
        let mut id = || ids.next().unwrap_or_default();
        match index {
            0 => Self::SendMessage,
            1 => Self::SendStreamingMessage,
            2 => Self::GetExtendedAgentCard,
            3 => Self::ListTasks,
            4 => Self::CancelTask { id: id() },
            5 => Self::SubscribeToTask { id: id() },
            6 => Self::GetTask { id: id() },
            7 => Self::CreateTaskPushNotificationConfig { task_id: id() },
            8 => Self::ListTaskPushNotificationConfigs { task_id: id() },
            9 => Self::GetTaskPushNotificationConfig {
                task_id: id(),
                id: id(),
            },
            _ => Self::DeleteTaskPushNotificationConfig {
                task_id: id(),
                id: id(),
            },
        }
    }
}

/// The router paths that cover the table, for routers without suffix
/// placeholders: the literal paths, and `prefix/{*rest}` for every path with
/// a placeholder (`/tasks/{*rest}`). A path matched by one of them still
/// goes through [`RestRoute::parse`].
pub fn router_paths() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for row in &ROUTES {
        let path = match row.path.find('{') {
            Some(i) => format!("{}{{*rest}}", &row.path[..i]),
            None => row.path.to_owned(),
        };
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// For a `{name}suffix` template segment, the suffix; `None` for a literal.
fn split_placeholder(segment: &str) -> Option<&str> {
    let rest = segment.strip_prefix('{')?;
    rest.find('}').map(|end| &rest[end + 1..])
}

/// The decoded ids when `segments` match the template.
fn match_path(template: &str, segments: &[&str]) -> Option<Vec<String>> {
    let parts: Vec<&str> = template.trim_start_matches('/').split('/').collect();
    if parts.len() != segments.len() {
        return None;
    }
    let mut ids = Vec::new();
    for (part, segment) in parts.iter().zip(segments) {
        match split_placeholder(part) {
            // The suffix is matched on the raw segment, so an encoded `:`
            // inside an id (`a%3Acancel`) is part of the id.
            Some(suffix) => {
                let raw = segment.strip_suffix(suffix)?;
                if raw.is_empty() {
                    return None;
                }
                ids.push(decode(raw).into_owned());
            }
            None if decode(segment) == *part => {}
            None => return None,
        }
    }
    Some(ids)
}

/// Percent-decodes a path segment (`+` is a literal plus in paths).
fn decode(segment: &str) -> Cow<'_, str> {
    percent_decode_str(segment).decode_utf8_lossy()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_route() -> Vec<RestRoute> {
        let id = "a/b:c?d#e%f é+g".to_owned();
        vec![
            RestRoute::SendMessage,
            RestRoute::SendStreamingMessage,
            RestRoute::GetExtendedAgentCard,
            RestRoute::ListTasks,
            RestRoute::CancelTask { id: id.clone() },
            RestRoute::SubscribeToTask { id: id.clone() },
            RestRoute::GetTask { id: id.clone() },
            RestRoute::CreateTaskPushNotificationConfig {
                task_id: id.clone(),
            },
            RestRoute::ListTaskPushNotificationConfigs {
                task_id: id.clone(),
            },
            RestRoute::GetTaskPushNotificationConfig {
                task_id: id.clone(),
                id: "cfg 1".into(),
            },
            RestRoute::DeleteTaskPushNotificationConfig {
                task_id: id,
                id: "cfg:cancel".into(),
            },
        ]
    }

    #[test]
    fn every_operation_is_built_then_parsed_back() {
        let routes = every_route();
        assert_eq!(routes.len(), ROUTES.len());
        for (i, route) in routes.iter().enumerate() {
            assert_eq!(route.template(), &ROUTES[i]);
            for tenant in ["", "acme", "te nant/x", "message:send"] {
                let path = route.path(tenant);
                for method in route.template().methods {
                    let parsed = RestRoute::parse(method.as_str(), &path);
                    assert_eq!(
                        parsed,
                        Ok((tenant.to_owned(), route.clone())),
                        "{method} {path}"
                    );
                }
            }
        }
    }

    #[test]
    fn built_paths() {
        assert_eq!(RestRoute::SendMessage.path(""), "/message:send");
        assert_eq!(
            RestRoute::CancelTask { id: "t-1".into() }.path("acme"),
            "/acme/tasks/t-1:cancel"
        );
        assert_eq!(
            RestRoute::SubscribeToTask {
                id: "a/b:c?d#e%f é".into()
            }
            .path("te nant/x"),
            "/te%20nant%2Fx/tasks/a%2Fb%3Ac%3Fd%23e%25f%20%C3%A9:subscribe"
        );
        assert_eq!(
            RestRoute::DeleteTaskPushNotificationConfig {
                task_id: "t".into(),
                id: "cfg 1".into()
            }
            .path(""),
            "/tasks/t/pushNotificationConfigs/cfg%201"
        );
        assert_eq!(
            RestRoute::SubscribeToTask { id: "x".into() }.method(),
            RestMethod::Get
        );
    }

    #[test]
    fn parsed_paths() {
        let ok = |m: &str, p: &str| RestRoute::parse(m, p).unwrap();
        assert_eq!(
            ok("POST", "/message:send"),
            (String::new(), RestRoute::SendMessage)
        );
        assert_eq!(
            ok("POST", "/acme/message:stream"),
            ("acme".into(), RestRoute::SendStreamingMessage)
        );
        assert_eq!(ok("GET", "/tasks/"), (String::new(), RestRoute::ListTasks));
        // Without a tenant first: `/tasks/tasks` is the task named `tasks`.
        assert_eq!(
            ok("GET", "/tasks/tasks"),
            (String::new(), RestRoute::GetTask { id: "tasks".into() })
        );
        // `+` is a plus in a path, an encoded `:` belongs to the id.
        assert_eq!(
            ok("GET", "/tasks/a+b%3Acancel"),
            (
                String::new(),
                RestRoute::GetTask {
                    id: "a+b:cancel".into()
                }
            )
        );
        assert_eq!(
            ok("POST", "/tasks/x:subscribe"),
            (String::new(), RestRoute::SubscribeToTask { id: "x".into() })
        );
        assert_eq!(
            ok("GET", "/a/tasks/x/pushNotificationConfigs"),
            (
                "a".into(),
                RestRoute::ListTaskPushNotificationConfigs {
                    task_id: "x".into()
                }
            )
        );
        let err = |m: &str, p: &str| RestRoute::parse(m, p).unwrap_err();
        assert_eq!(err("GET", "/message:send"), RouteError::MethodNotAllowed);
        assert_eq!(err("GET", "/tasks/x:cancel"), RouteError::MethodNotAllowed);
        assert_eq!(
            err("PUT", "/t/tasks/x/pushNotificationConfigs/c"),
            RouteError::MethodNotAllowed
        );
        assert_eq!(err("GET", "/nothing/here/at/all"), RouteError::NotFound);
        assert_eq!(err("GET", "/"), RouteError::NotFound);
        assert_eq!(err("GET", "//tasks/x/y"), RouteError::NotFound);
    }

    #[test]
    fn router_paths_cover_the_table() {
        assert_eq!(
            router_paths(),
            [
                "/message:send",
                "/message:stream",
                "/extendedAgentCard",
                "/tasks",
                "/tasks/{*rest}"
            ]
        );
    }
}
