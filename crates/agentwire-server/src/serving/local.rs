//! An agent run from a terminal (every example, a first agent of one's
//! own): it listens on 127.0.0.1 and the port given on the command line,
//! and prints its address only once that port is bound, so that the
//! address it prints is one that answers. What can go wrong is said in one
//! sentence, with what to do.

use std::fmt;
use std::io;

use tokio::net::TcpListener;

/// Why an agent run from a terminal could not start (or stopped), as a
/// sentence for the person who ran it. Its `Debug` form is that sentence
/// too, so that a `main` returning `Result<(), StartError>` prints
/// `Error: ` and the sentence, not the fields of an I/O error.
pub struct StartError {
    kind: io::ErrorKind,
    message: String,
}

impl StartError {
    /// What kind of I/O failure it was (`InvalidInput` for a port argument
    /// that is not a port, `AddrInUse` for a port taken, ...).
    pub fn kind(&self) -> io::ErrorKind {
        self.kind
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StartError {}

impl From<io::Error> for StartError {
    fn from(e: io::Error) -> Self {
        Self {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

/// The port given as the program's first argument, `default_port` without
/// one (0 takes a free port).
fn port_from_args(default_port: u16) -> Result<u16, StartError> {
    match std::env::args().nth(1) {
        None => Ok(default_port),
        Some(p) => p.parse().map_err(|_| StartError {
            kind: io::ErrorKind::InvalidInput,
            message: format!("{p:?} is not a port number (0-65535)"),
        }),
    }
}

/// Binds 127.0.0.1 and the port given as the program's first argument
/// (`default_port` without one; `0` takes a free port); returns the
/// listener and its URL (`http://127.0.0.1:PORT`), to print now that the
/// port is bound. A port that cannot be bound is a [`StartError`] naming
/// the address and what to do (another program may hold the port).
///
/// [`crate::A2aServer::bind_local`] does the same for an [`crate::A2aServer`];
/// this is for an application that serves the [`crate::router`] itself.
pub async fn listen_local(default_port: u16) -> Result<(TcpListener, String), StartError> {
    let port = port_from_args(default_port)?;
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| StartError {
            kind: e.kind(),
            message: format!(
                "cannot listen on 127.0.0.1:{port} ({e}); another program may be using that \
                 port: stop it, or give another port as the first argument (`-- 9000`)"
            ),
        })?;
    let url = format!("http://{}", listener.local_addr()?);
    Ok((listener, url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_port_in_use_is_one_sentence() {
        let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = busy.local_addr().expect("its address").port();
        let e = TcpListener::bind(("127.0.0.1", port))
            .await
            .map(|_| ())
            .map_err(StartError::from)
            .expect_err("the port is taken");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        // Debug is the sentence: what `main` prints.
        assert_eq!(format!("{e:?}"), e.to_string());
        assert!(!format!("{e:?}").contains("Os {"));
    }
}
