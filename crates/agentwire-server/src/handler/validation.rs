//! Validation of request contents that needs no store: the message of a
//! send (id, role, parts, media types the card accepts), history lengths,
//! and the parameters of a task listing. Bounds on what one request may
//! ask for belong here.

use agentwire_types::limits::{ContentCheck, ReadLimits, id_problem};
use agentwire_types::{
    A2aError, A2aResult, ListTasksRequest, Message, Role, SendMessageRequest, TaskState,
};

use super::*;
use crate::store::{Cursor, TaskQuery};

pub(super) fn history_length(v: Option<i32>, field: &str) -> A2aResult<Option<usize>> {
    match v {
        None => Ok(None),
        Some(n) if n < 0 => Err(A2aError::invalid_params(
            field,
            format!("must be zero or more, got {n}"),
        )),
        Some(n) => Ok(Some(n as usize)),
    }
}

/// Whether a media type is accepted by a list of modes (with `*/*` and
/// `type/*` wildcards; parameters such as `; charset=utf-8` ignored).
pub(super) fn mode_accepted(modes: &[String], media_type: &str) -> bool {
    let base = |m: &str| {
        m.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    };
    let mt = base(media_type);
    modes.iter().any(|m| {
        let m = base(m);
        m == mt
            || m == "*/*"
            || m.strip_suffix("/*")
                .is_some_and(|t| mt.split('/').next() == Some(t))
    })
}

/// The store query of a `ListTasks` request: page size (50 unless given,
/// 1 to 100), state filter, page token, history length.
pub(super) fn task_query(req: ListTasksRequest) -> A2aResult<TaskQuery> {
    let page_size = match req.page_size {
        None => 50,
        Some(n @ 1..=100) => n as usize,
        Some(n) => {
            return Err(A2aError::invalid_params(
                "pageSize",
                format!("must be between 1 and 100, got {n}"),
            ));
        }
    };
    // The filters are checked here, once for every binding: the JSON
    // ones refuse an unknown state or a bad time while decoding, but a
    // protobuf message carries any number and any time.
    let state = match TaskState::try_from(req.status) {
        Ok(TaskState::Unspecified) => None,
        Ok(s) => Some(s),
        Err(_) => {
            return Err(A2aError::invalid_params(
                "status",
                format!("unknown task state {}", req.status),
            ));
        }
    };
    if let Some(t) = &req.status_timestamp_after {
        if t.to_datetime().is_none() {
            return Err(A2aError::invalid_params(
                "statusTimestampAfter",
                "not a valid time (seconds and nanoseconds out of range)",
            ));
        }
    }
    if let Some(why) = id_problem(&req.context_id) {
        return Err(A2aError::invalid_params("contextId", why));
    }
    let cursor = if req.page_token.is_empty() {
        None
    } else {
        Some(Cursor::decode(&req.page_token).ok_or_else(|| {
            A2aError::invalid_params("pageToken", "not a page token returned by ListTasks")
        })?)
    };
    Ok(TaskQuery {
        context_id: (!req.context_id.is_empty()).then_some(req.context_id),
        state,
        status_after: req.status_timestamp_after,
        page_size,
        cursor,
        history_length: history_length(req.history_length, "historyLength")?,
        include_artifacts: req.include_artifacts.unwrap_or(false),
    })
}

impl RequestHandler {
    /// The limits the bindings read this handler's requests with
    /// ([`agentwire_types::limits`]): `max_parts` from the configuration.
    pub(crate) fn read_limits(&self) -> ReadLimits {
        ReadLimits::with_max_parts(self.inner.config.max_parts)
    }

    /// The nesting and size of what a send carries (metadata, parts'
    /// metadata and data, lists), by the same rules the bindings apply
    /// while reading it: a request built by a program, or decoded by a
    /// reader that does not count, is refused here.
    pub(super) fn validate_content(&self, req: &SendMessageRequest) -> A2aResult<()> {
        let mut check = ContentCheck::request(&self.read_limits());
        check.structure(req.metadata.as_ref(), "metadata")?;
        if let Some(m) = &req.message {
            check.message(m, "message")?;
        }
        if let Some(c) = &req.configuration {
            check.list(
                &c.accepted_output_modes,
                "configuration.acceptedOutputModes",
            )?;
        }
        Ok(())
    }

    pub(super) fn validate_message(&self, message: Option<&Message>) -> A2aResult<()> {
        let Some(m) = message else {
            return Err(A2aError::invalid_params("message", "a message is required"));
        };
        if m.message_id.is_empty() {
            return Err(A2aError::invalid_params(
                "message.messageId",
                "a message id is required",
            ));
        }
        // Ids a store keeps in its own columns (a task id or reference
        // task ids are looked up, see `visible_task`).
        if let Some(why) = id_problem(&m.context_id) {
            return Err(A2aError::invalid_params("message.contextId", why));
        }
        match m.role() {
            Role::User => {}
            Role::Unspecified => {
                return Err(A2aError::invalid_params(
                    "message.role",
                    "the role is required (ROLE_USER)",
                ));
            }
            Role::Agent => {
                return Err(A2aError::invalid_params(
                    "message.role",
                    "messages sent to an agent have ROLE_USER",
                ));
            }
        }
        if m.parts.is_empty() {
            return Err(A2aError::invalid_params(
                "message.parts",
                "at least one part is required",
            ));
        }
        let max_parts = self.inner.config.max_parts;
        if m.parts.len() > max_parts {
            return Err(A2aError::invalid_params(
                "message.parts",
                format!(
                    "a message may have at most {max_parts} parts, this one has {}",
                    m.parts.len()
                ),
            ));
        }
        let modes = &self.inner.card.default_input_modes;
        for (i, p) in m.parts.iter().enumerate() {
            if p.content.is_none() {
                return Err(A2aError::invalid_params(
                    format!("message.parts[{i}]"),
                    "a part needs exactly one of text, raw, url or data",
                ));
            }
            if !p.media_type.is_empty() && !modes.is_empty() && !mode_accepted(modes, &p.media_type)
            {
                return Err(A2aError::content_type_not_supported(format!(
                    "media type {} is not accepted by this agent (accepted: {})",
                    p.media_type,
                    modes.join(", ")
                ))
                .with_metadata("mediaType", p.media_type.clone()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_against_modes() {
        let modes = vec!["text/plain".to_owned(), "image/*".to_owned()];
        assert!(mode_accepted(&modes, "text/plain; charset=utf-8"));
        assert!(mode_accepted(&modes, "image/png"));
        assert!(!mode_accepted(&modes, "application/pdf"));
    }
}
