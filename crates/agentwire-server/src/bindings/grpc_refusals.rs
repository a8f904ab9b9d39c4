//! The gRPC services served beside the 1.0 A2A service (the 0.3
//! `a2a.v1.A2AService`, `grpc.health.v1.Health`, server reflection) answer
//! a request message they cannot read as the 1.0 service does
//! ([`super::grpc::refusal_status`]): bytes that are not the method's
//! protobuf message are `INVALID_ARGUMENT`, a message over the limit
//! `RESOURCE_EXHAUSTED`, each with an A2A `ErrorInfo`, where tonic alone
//! says `INTERNAL` and `OUT_OF_RANGE`.
//!
//! A unary request message is decoded before the service sees it: tonic
//! refuses a bad one "trailers-only", and the status in the response head
//! is rewritten. A streaming request's messages are decoded by the service
//! as it reads them; tonic's reflection service ends its answer without an
//! error when one is bad (the status says `OK`). For such a service each
//! request message is checked as it arrives ([`Refusing::checking`]): a
//! bad one ends the request stream there (good messages that came in the
//! same HTTP/2 frame before it are not read either), and the status at the
//! end of the answer says why.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use hyper::body::{Body, Frame};
use tonic::Status;

use super::grpc::{refusal_codes, refusal_status};

/// The response of a tonic service.
type GrpcResponse = http::Response<tonic::body::Body>;

/// Whether some bytes are a valid request message of the method.
type Check = fn(&[u8]) -> bool;

/// A tonic service whose refusals of unreadable request messages have the
/// codes gRPC prescribes (see the [module documentation](self)).
#[derive(Clone)]
pub(crate) struct Refusing<S> {
    inner: S,
    limit: usize,
    check: Option<Check>,
}

impl<S> Refusing<S> {
    /// `inner`, whose request messages are limited to `limit` bytes (the
    /// limit it was built with, named in the refusal).
    pub(crate) fn new(inner: S, limit: usize) -> Self {
        Self {
            inner,
            limit,
            check: None,
        }
    }

    /// `inner`, a service reading a stream of request messages, each
    /// checked with `check` (and against `limit`) as it arrives.
    pub(crate) fn checking(inner: S, limit: usize, check: Check) -> Self {
        Self {
            inner,
            limit,
            check: Some(check),
        }
    }
}

/// `check` for request messages of type `M`.
pub(crate) fn decodes<M: prost::Message + Default>(bytes: &[u8]) -> bool {
    M::decode(bytes).is_ok()
}

impl<S, B> tower::Service<http::Request<B>> for Refusing<S>
where
    S: tower::Service<http::Request<Checked<B>>, Response = GrpcResponse, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = GrpcResponse;
    type Error = Infallible;
    type Future = RefusingFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let refused = self.check.map(|_| Arc::new(OnceLock::new()));
        let request = request.map(|body| Checked {
            inner: body,
            check: self.check,
            limit: self.limit,
            buf: BytesMut::new(),
            refused: refused.clone(),
        });
        RefusingFuture {
            inner: self.inner.call(request),
            limit: self.limit,
            refused,
        }
    }
}

/// The future of a [`Refusing`] call.
pub(crate) struct RefusingFuture<F> {
    inner: F,
    limit: usize,
    refused: Option<Arc<OnceLock<Status>>>,
}

impl<F> Future for RefusingFuture<F>
where
    F: Future<Output = Result<GrpcResponse, Infallible>> + Unpin,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let response = ready!(Pin::new(&mut self.inner).poll(cx));
        let Ok(response) = response;
        let response = refusal_codes(response, self.limit);
        Poll::Ready(Ok(match self.refused.take() {
            Some(refused) => response.map(|body| {
                tonic::body::Body::new(Amended {
                    inner: body,
                    refused,
                    ended: false,
                })
            }),
            None => response,
        }))
    }
}

pin_project_lite::pin_project! {
    /// A request body whose messages are checked as they arrive (when the
    /// service has a check): a bad one ends it, its status kept for the
    /// end of the answer.
    pub(crate) struct Checked<B> {
        #[pin]
        inner: B,
        check: Option<Check>,
        limit: usize,
        // The part of a message received so far.
        buf: BytesMut,
        refused: Option<Arc<OnceLock<Status>>>,
    }
}

impl<B> Checked<B> {
    /// Checks the whole messages in `buf` (each a flag byte, a 4-byte
    /// length, then the message); the first bad one's status.
    fn check_messages(buf: &mut BytesMut, check: Check, limit: usize) -> Option<Status> {
        while buf.len() >= 5 {
            let compressed = buf[0] != 0;
            let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
            if len > limit {
                return Some(Status::out_of_range(format!(
                    "a request message of {len} bytes; the limit is {limit}"
                )));
            }
            if buf.len() < 5 + len {
                break;
            }
            let message = buf.split_to(5 + len);
            if compressed {
                return Some(Status::internal(
                    "a compressed request message, but the request names no compression",
                ));
            }
            if !check(&message[5..]) {
                return Some(Status::internal("the message does not decode"));
            }
        }
        None
    }
}

impl<B> Body for Checked<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let (Some(check), Some(refused)) = (*this.check, this.refused.as_ref()) else {
            return this.inner.poll_frame(cx);
        };
        if refused.get().is_some() {
            return Poll::Ready(None);
        }
        let frame = ready!(this.inner.poll_frame(cx));
        if let Some(data) = frame.as_ref().and_then(|f| f.as_ref().ok()?.data_ref()) {
            this.buf.extend_from_slice(data.chunk());
            if let Some(status) = Self::check_messages(this.buf, check, *this.limit) {
                let status = refusal_status(&status, *this.limit).unwrap_or(status);
                let _ = refused.set(status);
                this.buf.clear();
                return Poll::Ready(None);
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
            || self
                .refused
                .as_ref()
                .is_some_and(|refused| refused.get().is_some())
    }
}

pin_project_lite::pin_project! {
    /// An answer whose final status is the one of a refused request
    /// message, when there was one.
    struct Amended<B> {
        #[pin]
        inner: B,
        refused: Arc<OnceLock<Status>>,
        ended: bool,
    }
}

/// `trailers` saying `status` instead of what they said.
fn with_status(mut trailers: http::HeaderMap, status: &Status) -> http::HeaderMap {
    for name in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        trailers.remove(name);
    }
    if status.add_header(&mut trailers).is_err() {
        // The status's own fields always encode as headers.
        tracing::debug!("could not write a gRPC status");
    }
    trailers
}

impl<B> Body for Amended<B>
where
    B: Body<Data = Bytes, Error = Status>,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.project();
        if *this.ended {
            return Poll::Ready(None);
        }
        match ready!(this.inner.poll_frame(cx)) {
            Some(Ok(frame)) if frame.is_trailers() => {
                *this.ended = true;
                let trailers = frame.into_trailers().unwrap_or_default();
                Poll::Ready(Some(Ok(Frame::trailers(match this.refused.get() {
                    Some(status) => with_status(trailers, status),
                    None => trailers,
                }))))
            }
            None => {
                *this.ended = true;
                Poll::Ready(
                    this.refused
                        .get()
                        .map(|status| Ok(Frame::trailers(with_status(Default::default(), status)))),
                )
            }
            other => Poll::Ready(other),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || (self.inner.is_end_stream() && self.refused.get().is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    #[test]
    fn messages_are_checked_whole_as_they_arrive() {
        let check: Check = decodes::<tonic_health::pb::HealthCheckRequest>;
        let good = framed(&[0x0a, 0x01, b'x']);
        let mut buf = BytesMut::new();
        // Half a message: nothing to say yet.
        buf.extend_from_slice(&good[..4]);
        assert!(Checked::<()>::check_messages(&mut buf, check, 100).is_none());
        buf.extend_from_slice(&good[4..]);
        assert!(Checked::<()>::check_messages(&mut buf, check, 100).is_none());
        assert!(buf.is_empty());
        // Garbage.
        buf.extend_from_slice(&framed(&[0xff, 0xff, 0xff, 0xff, 0x0f]));
        let status = Checked::<()>::check_messages(&mut buf, check, 100).unwrap();
        assert_eq!(status.code(), tonic::Code::Internal);
        // Over the limit, refused from its length alone.
        let mut buf = BytesMut::from(&framed(&[0; 200])[..5]);
        let status = Checked::<()>::check_messages(&mut buf, check, 100).unwrap();
        assert_eq!(status.code(), tonic::Code::OutOfRange);
    }
}
