//! A tiny canned HTTP/1.1 server for the transports' tests: it records each
//! request and answers what the test's responder says.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("JSON request body")
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Canned {
    pub status: u16,
    pub content_type: String,
    /// Written one after the other, flushed, with `pause` in between.
    pub chunks: Vec<Vec<u8>>,
    pub pause: Duration,
}

impl Canned {
    pub fn json(status: u16, body: serde_json::Value) -> Self {
        Self {
            status,
            content_type: "application/json".into(),
            chunks: vec![serde_json::to_vec(&body).unwrap()],
            pause: Duration::ZERO,
        }
    }

    pub fn text(status: u16, body: &str) -> Self {
        Self {
            status,
            content_type: "text/plain".into(),
            chunks: vec![body.as_bytes().to_vec()],
            pause: Duration::ZERO,
        }
    }

    pub fn sse(chunks: &[&str]) -> Self {
        Self {
            status: 200,
            content_type: "text/event-stream".into(),
            chunks: chunks.iter().map(|c| c.as_bytes().to_vec()).collect(),
            pause: Duration::from_millis(5),
        }
    }

    pub fn delayed(mut self, pause: Duration) -> Self {
        self.pause = pause;
        self.chunks.insert(0, Vec::new());
        self
    }
}

pub(crate) struct MockServer {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

impl MockServer {
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

/// A port on which nothing listens.
pub(crate) fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

pub(crate) async fn serve<F>(responder: F) -> MockServer
where
    F: Fn(&Recorded) -> Canned + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let recorded = requests.clone();
    let responder = Arc::new(responder);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let recorded = recorded.clone();
            let responder = responder.clone();
            tokio::spawn(async move {
                let Some(req) = read_request(&mut sock).await else {
                    return;
                };
                recorded.lock().unwrap().push(req.clone());
                let canned = responder(&req);
                let total: usize = canned.chunks.iter().map(Vec::len).sum();
                let head = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: {}\r\ncontent-length: {total}\r\nconnection: close\r\n\r\n",
                    canned.status, canned.content_type
                );
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for chunk in &canned.chunks {
                    if !canned.pause.is_zero() {
                        tokio::time::sleep(canned.pause).await;
                    }
                    if sock.write_all(chunk).await.is_err() || sock.flush().await.is_err() {
                        return;
                    }
                }
                let _ = sock.shutdown().await;
            });
        }
    });
    MockServer { url, requests }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Some(Recorded {
        method,
        target,
        headers,
        body,
    })
}
